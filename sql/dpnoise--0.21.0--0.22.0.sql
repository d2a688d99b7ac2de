-- dpnoise 0.21.0 → 0.22.0: public lists of values of categorical columns; an analyst's filter-value query answered from them (src/gate/policy/values.rs); total forms of AT TIME ZONE; dp_bounding_loss.
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

-- Total forms of AT TIME ZONE (src/total/dates.rs, total.sql).
CREATE FUNCTION dp_total_timestamptz_zone(text, timestamp with time zone) RETURNS timestamp without time zone
    AS 'MODULE_PATHNAME', 'dp_total_timestamptz_zone' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_timestamp_zone(text, timestamp without time zone) RETURNS timestamp with time zone
    AS 'MODULE_PATHNAME', 'dp_total_timestamp_zone' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION dp_total_timestamptz_zone(text, timestamp with time zone) IS
    'Total form of timezone(text,timestamp with time zone), timestamptz AT TIME ZONE zone: NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_timestamp_zone(text, timestamp without time zone) IS
    'Total form of timezone(text,timestamp without time zone), timestamp AT TIME ZONE zone: NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';

-- What bounding drops (0.22.0, docs/bi.md): over several rows per person a
-- plain count counts at most rows_per_person of a person's rows in a
-- group, and a person adds to at most max_groups_contributed groups, so
-- the answers are low by the rows beyond. The noise interval does not
-- show it; this estimate of the share of rows kept does, for the DBA
-- choosing R and k, with its own charge (two sums at epsilon / 2 each, to
-- the caller's budget): for each person, their rows in each group up to R,
-- times the share of their groups the bounding keeps (k of m, chosen at
-- random), over their rows (at most max_rows a person).
CREATE FUNCTION dp_bounding_loss(tbl regclass, epsilon double precision, rows_per_person integer DEFAULT NULL,
                                 group_column name DEFAULT NULL, max_groups integer DEFAULT NULL,
                                 max_rows integer DEFAULT 100)
RETURNS TABLE (rows_kept double precision, rows_total double precision, share_dropped double precision)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    unit name;
    r integer;
    k integer;
    grouping text;
BEGIN
    SELECT p.privacy_unit, coalesce($3, p.rows_per_person, current_setting('dpnoise.policy_rows_per_person')::integer),
           coalesce($5, p.max_groups_contributed)
      INTO unit, r, k FROM dpnoise.protected p WHERE p.relid = $1;
    IF unit IS NULL THEN
        RAISE EXCEPTION 'table % is not protected: call dp_protect first', tbl USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF epsilon IS NULL OR NOT (epsilon > 0 AND epsilon <= 100) THEN
        RAISE EXCEPTION 'epsilon must be above 0 and at most 100' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF r NOT BETWEEN 1 AND 1000000 OR k NOT BETWEEN 1 AND 1000 OR max_rows IS NULL OR max_rows NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'rows_per_person must be 1 to 1000000, max_groups 1 to 1000, max_rows 1 to 1000000'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF group_column IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_attribute a
        WHERE a.attrelid = $1 AND a.attname = $4 AND a.attnum > 0 AND NOT a.attisdropped) THEN
        RAISE EXCEPTION 'table % has no column %', tbl, group_column USING ERRCODE = 'undefined_column';
    END IF;
    grouping := CASE WHEN group_column IS NULL THEN 'NULL::integer' ELSE quote_ident(group_column) END;
    RETURN QUERY EXECUTE format(
        'SELECT b.kept, b.total, 1 - b.kept / nullif(b.total, 0) FROM (
           SELECT @extschema@.dp_sum(p.kept, $1 / 2, 0, %2$s) AS kept, @extschema@.dp_sum(p.total, $1 / 2, 0, %3$s) AS total
           FROM (SELECT g.u, sum(least(g.n, %4$s))::float8 * least(1.0, %5$s::float8 / count(*)) AS kept,
                        least(sum(g.n), %3$s)::float8 AS total
                 FROM (SELECT t.%6$I AS u, %7$s AS c, count(*) AS n FROM %1$s t GROUP BY 1, 2) g GROUP BY g.u) p) b',
        tbl, (r::bigint * k), max_rows, r, k, unit, grouping)
    USING epsilon;
END $$;
COMMENT ON FUNCTION dp_bounding_loss(regclass, double precision, integer, name, integer, integer) IS
    'Estimates, with its own charge (epsilon, to the caller), the rows a plain count over several rows per person keeps when each person adds at most rows_per_person rows to a group and is in at most max_groups groups of group_column (defaults: the table''s policy and protection), against all rows (at most max_rows a person): the bias the noise interval does not show.';
REVOKE EXECUTE ON FUNCTION dp_bounding_loss(regclass, double precision, integer, name, integer, integer) FROM PUBLIC;
