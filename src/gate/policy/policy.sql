-- The privacy policy of protected tables (src/gate/policy/, docs/bi.md):
-- what an analyst's plain aggregates (count, sum, avg) become. Each
-- protected table's statement epsilon (NULL: dpnoise.policy_epsilon) is
-- split among the plain aggregates of a statement; on a table of several
-- rows per person (or a join), a person adds at most rows_per_person rows
-- to a group's count or sum (NULL: dpnoise.policy_rows_per_person); a
-- column's domain bounds its values for sum and avg.
ALTER TABLE dpnoise.protected
    ADD COLUMN statement_epsilon double precision CHECK (statement_epsilon > 0 AND statement_epsilon <= 100),
    ADD COLUMN rows_per_person integer CHECK (rows_per_person BETWEEN 1 AND 1000000);
CREATE TABLE dpnoise.domains (
    relid       regclass NOT NULL REFERENCES dpnoise.protected ON DELETE CASCADE,
    column_name name NOT NULL,
    lower       double precision NOT NULL,
    upper       double precision NOT NULL,
    PRIMARY KEY (relid, column_name),
    CHECK (lower <= upper AND lower > '-Infinity' AND upper < 'Infinity')
);
SELECT pg_catalog.pg_extension_config_dump('dpnoise.domains', '');
COMMENT ON TABLE dpnoise.domains IS
    'The public domain of protected tables'' numeric columns (dp_domain): an analyst''s plain sum and avg of one are released with these bounds.';
COMMENT ON COLUMN dpnoise.protected.statement_epsilon IS
    'The epsilon an analyst''s statement spends on this table''s plain aggregates (dp_policy); NULL: dpnoise.policy_epsilon.';
COMMENT ON COLUMN dpnoise.protected.rows_per_person IS
    'The rows a person adds at most to a group''s plain count or sum over several rows per person (dp_policy); NULL: dpnoise.policy_rows_per_person.';

CREATE FUNCTION dp_policy(tbl regclass, statement_epsilon double precision DEFAULT NULL,
                          rows_per_person integer DEFAULT NULL) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF statement_epsilon <= 0 OR statement_epsilon > 100 OR statement_epsilon = 'NaN' THEN
        RAISE EXCEPTION 'statement_epsilon must be above 0 and at most 100 (NULL: dpnoise.policy_epsilon)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF rows_per_person NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'rows_per_person must be between 1 and 1000000 (NULL: dpnoise.policy_rows_per_person)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dpnoise.protected p SET statement_epsilon = $2, rows_per_person = $3 WHERE p.relid = $1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'table % is not protected: call dp_protect first', tbl USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A dashboard reload repeats its releases, free while the table is unchanged.
    BEGIN
        PERFORM @extschema@.dp_track(tbl);
    EXCEPTION WHEN wrong_object_type OR feature_not_supported THEN
        RAISE NOTICE 'dp_policy: % cannot be tracked for writes, so each statement over it is a new release, charged', tbl
            USING DETAIL = SQLERRM;
    END;
    PERFORM @extschema@.dp_gate_changed();
END $$;
COMMENT ON FUNCTION dp_policy(regclass, double precision, integer) IS
    'Sets the epsilon an analyst''s statement spends on this table''s plain aggregates (count, sum, avg), split evenly among them, and the rows a person adds at most to a plain count or sum over several rows per person (NULL: the server''s dpnoise.policy_epsilon and dpnoise.policy_rows_per_person); tracks the table''s writes (dp_track), so that a repeated statement is free while it is unchanged.';

CREATE FUNCTION dp_domain(tbl regclass, column_name name, lower double precision, upper double precision) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF tbl IS NULL OR column_name IS NULL THEN
        RAISE EXCEPTION 'table and column_name must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM dpnoise.protected p WHERE p.relid = $1) THEN
        RAISE EXCEPTION 'table % is not protected: call dp_protect first', tbl USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                   WHERE a.attrelid = $1 AND a.attname = $2 AND a.attnum > 0 AND NOT a.attisdropped) THEN
        RAISE EXCEPTION 'table % has no column %', tbl, column_name USING ERRCODE = 'undefined_column';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                   WHERE a.attrelid = $1 AND a.attname = $2
                     AND a.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype,
                                        'float4'::regtype, 'float8'::regtype, 'numeric'::regtype)) THEN
        RAISE EXCEPTION 'column % of % is not a number: a domain bounds smallint, integer, bigint, real, double precision or numeric',
            column_name, tbl USING ERRCODE = 'datatype_mismatch';
    END IF;
    IF lower IS NULL AND upper IS NULL THEN
        DELETE FROM dpnoise.domains d WHERE d.relid = $1 AND d.column_name = $2;
    ELSIF lower IS NULL OR upper IS NULL OR NOT (lower <= upper)
          OR lower = '-Infinity' OR upper = 'Infinity' THEN
        RAISE EXCEPTION 'a domain is two finite bounds, lower <= upper (both NULL: none)'
            USING ERRCODE = 'invalid_parameter_value';
    ELSE
        INSERT INTO dpnoise.domains AS d VALUES ($1, $2, $3, $4)
        ON CONFLICT ON CONSTRAINT domains_pkey DO UPDATE SET lower = excluded.lower, upper = excluded.upper;
    END IF;
    PERFORM @extschema@.dp_gate_changed();
END $$;
COMMENT ON FUNCTION dp_domain(regclass, name, double precision, double precision) IS
    'Sets the public domain of a protected table''s numeric column: an analyst''s plain sum and avg of it are released with these bounds (values outside are clamped); both NULL removes it.';

-- The noise of plain aggregates, written beside their value (docs/bi.md):
-- the analyst gate rewrites each call into the half-width of the interval
-- that holds the value's noiseless answer with the confidence; outside an
-- analyst's statement there is nothing to rewrite.
CREATE FUNCTION dp_error(value anyelement, confidence double precision DEFAULT 0.95) RETURNS double precision
LANGUAGE plpgsql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'dp_error is written around a plain count, sum, avg, variance or stddev of a protected table in an analyst''s statement, beside the same aggregate'
        USING ERRCODE = 'feature_not_supported',
              HINT = 'As a curator, read the error of a release with dp_query_accuracy.';
END $$;
COMMENT ON FUNCTION dp_error(anyelement, double precision) IS
    'In an analyst''s statement, beside the same plain count, sum, avg, variance or stddev of a protected table: the half-width of the interval around its released value that holds the noiseless value with the confidence (0.95); releases and charges nothing.';

-- The ends of that interval (docs/bi.md, "Errors and intervals"): the gate writes the
-- level that releases the value as a subquery, and these, the value and
-- dp_error beside it, as dp_estimate over its releases.
CREATE FUNCTION dp_interval_low(value anyelement, confidence double precision DEFAULT 0.95) RETURNS double precision
LANGUAGE plpgsql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'dp_interval_low is written around a plain aggregate of a protected table in an analyst''s statement, beside the same aggregate'
        USING ERRCODE = 'feature_not_supported',
              HINT = 'As a curator, read the error of a release with dp_query_accuracy.';
END $$;
COMMENT ON FUNCTION dp_interval_low(anyelement, double precision) IS
    'In an analyst''s statement, beside the same plain count, sum, avg, variance or stddev of a protected table: the low end of the interval that holds its noiseless value with the confidence (0.95); releases and charges nothing more.';
CREATE FUNCTION dp_interval_high(value anyelement, confidence double precision DEFAULT 0.95) RETURNS double precision
LANGUAGE plpgsql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'dp_interval_high is written around a plain aggregate of a protected table in an analyst''s statement, beside the same aggregate'
        USING ERRCODE = 'feature_not_supported',
              HINT = 'As a curator, read the error of a release with dp_query_accuracy.';
END $$;
COMMENT ON FUNCTION dp_interval_high(anyelement, double precision) IS
    'In an analyst''s statement, beside the same plain count, sum, avg, variance or stddev of a protected table: the high end of the interval that holds its noiseless value with the confidence (0.95); releases and charges nothing more.';
COMMENT ON FUNCTION dp_estimate(double precision[], integer) IS
    'Written by the analyst gate above a level that releases a plain aggregate with its interval: from the releases and their half-widths, 1 the value, 2 the low end, 3 the high end, 4 the half-width; reads no table.';

REVOKE EXECUTE ON FUNCTION dp_policy(regclass, double precision, integer),
    dp_domain(regclass, name, double precision, double precision) FROM PUBLIC;

-- What the DBA and analysts see: each protected table's policy.
CREATE VIEW dp_policies AS
SELECT p.relid AS table_name, p.statement_epsilon, p.rows_per_person, d.column_name, d.lower, d.upper
FROM dpnoise.protected p LEFT JOIN dpnoise.domains d ON d.relid = p.relid;
COMMENT ON VIEW dp_policies IS
    'Protected tables'' privacy policies: the epsilon of a statement''s plain aggregates (NULL: dpnoise.policy_epsilon), the rows a person adds to a plain count or sum (NULL: dpnoise.policy_rows_per_person) and each column''s domain.';
GRANT SELECT ON dp_policies TO PUBLIC;
