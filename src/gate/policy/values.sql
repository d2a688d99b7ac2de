-- Public value lists of protected tables' categorical columns (0.22.0,
-- src/gate/policy/values.rs, docs/bi.md): a BI tool's filter-value query
-- over such a column (SELECT DISTINCT region FROM visits) is answered from
-- the list the DBA declares, not from the rows: free, and the same
-- whatever the data.
CREATE TABLE dpnoise.value_lists (
    relid       regclass NOT NULL REFERENCES dpnoise.protected ON DELETE CASCADE,
    column_name name NOT NULL,
    vals        text[] NOT NULL CHECK (cardinality(vals) BETWEEN 1 AND 10000 AND array_ndims(vals) = 1
                                      AND array_position(vals, NULL) IS NULL),
    PRIMARY KEY (relid, column_name)
);
SELECT pg_catalog.pg_extension_config_dump('dpnoise.value_lists', '');
COMMENT ON TABLE dpnoise.value_lists IS
    'The public list of values of protected tables'' categorical columns (dp_domain): an analyst''s filter-value query over one is answered from it.';

CREATE FUNCTION dp_domain(tbl regclass, column_name name, vals text[]) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    typ text;
    distinct_vals text[];
BEGIN
    IF tbl IS NULL OR column_name IS NULL THEN
        RAISE EXCEPTION 'table and column_name must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM dpnoise.protected p WHERE p.relid = $1) THEN
        RAISE EXCEPTION 'table % is not protected: call dp_protect first', tbl USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT format_type(a.atttypid, a.atttypmod) INTO typ FROM pg_catalog.pg_attribute a
    WHERE a.attrelid = $1 AND a.attname = $2 AND a.attnum > 0 AND NOT a.attisdropped;
    IF typ IS NULL THEN
        RAISE EXCEPTION 'table % has no column %', tbl, column_name USING ERRCODE = 'undefined_column';
    END IF;
    IF vals IS NULL THEN
        DELETE FROM dpnoise.value_lists l WHERE l.relid = $1 AND l.column_name = $2;
        PERFORM @extschema@.dp_gate_changed();
        RETURN;
    END IF;
    IF cardinality(vals) NOT BETWEEN 1 AND 10000 OR array_ndims(vals) <> 1 OR array_position(vals, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'a list of values is 1 to 10000 values, none NULL (NULL: none)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Each value must be one of the column's type, in its own text form:
    -- the list is read back as that type whenever a statement uses it.
    -- Values equal in that type ('3.0' and '3.00', '-0' and '0') are kept
    -- once, in their least text form: a statement's DISTINCT over the list
    -- then has no equal values to choose between, whatever its plan.
    BEGIN
        EXECUTE format('SELECT array_agg(t ORDER BY t) FROM (SELECT DISTINCT ON (v) v::text AS t '
                       'FROM unnest($1::%s[]) v ORDER BY v, v::text) s', typ) INTO distinct_vals USING vals;
    EXCEPTION WHEN data_exception THEN
        RAISE EXCEPTION 'a value of the list is not of type %, the type of column % of %', typ, column_name, tbl
            USING ERRCODE = 'invalid_text_representation', DETAIL = SQLERRM;
    WHEN undefined_function THEN
        RAISE EXCEPTION 'column % of % has no ordering (type %): a list of values needs one', column_name, tbl, typ
            USING ERRCODE = 'datatype_mismatch';
    END;
    INSERT INTO dpnoise.value_lists AS l VALUES ($1, $2, distinct_vals)
    ON CONFLICT ON CONSTRAINT value_lists_pkey DO UPDATE SET vals = excluded.vals;
    PERFORM @extschema@.dp_gate_changed();
END $$;
COMMENT ON FUNCTION dp_domain(regclass, name, text[]) IS
    'Sets the public list of values of a protected table''s categorical column (each in the column''s type): an analyst''s filter-value query over it (SELECT DISTINCT column, or GROUP BY column without aggregates) is answered from the list, free, whatever the rows; NULL removes it.';
REVOKE EXECUTE ON FUNCTION dp_domain(regclass, name, text[]) FROM PUBLIC;

-- The policies' view shows the lists too.
CREATE OR REPLACE VIEW dp_policies AS
SELECT p.relid AS table_name, p.statement_epsilon, p.rows_per_person, c.column_name, d.lower, d.upper, l.vals
FROM dpnoise.protected p
LEFT JOIN (SELECT d.relid, d.column_name FROM dpnoise.domains d
           UNION SELECT l.relid, l.column_name FROM dpnoise.value_lists l) c ON c.relid = p.relid
LEFT JOIN dpnoise.domains d ON d.relid = c.relid AND d.column_name = c.column_name
LEFT JOIN dpnoise.value_lists l ON l.relid = c.relid AND l.column_name = c.column_name;
COMMENT ON VIEW dp_policies IS
    'Protected tables'' privacy policies: the epsilon of a statement''s plain aggregates (NULL: dpnoise.policy_epsilon), the rows a person adds to a plain count or sum (NULL: dpnoise.policy_rows_per_person), each numeric column''s domain and each categorical column''s list of values.';
