-- dpnoise 0.24.0 → 0.25.0: intervals of plain averages and spreads, and the ends of every plain aggregate's interval (dp_interval_low, dp_interval_high), computed by dp_estimate above the level that releases them (src/gate/policy/split.rs), as in policy.sql.
CREATE FUNCTION "dp_estimate"("parts" double precision[], "part" INT) RETURNS double precision IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'dp_estimate_wrapper';
CREATE OR REPLACE FUNCTION dp_error(value anyelement, confidence double precision DEFAULT 0.95) RETURNS double precision
LANGUAGE plpgsql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'dp_error is written around a plain count, sum, avg, variance or stddev of a protected table in an analyst''s statement, beside the same aggregate'
        USING ERRCODE = 'feature_not_supported',
              HINT = 'As a curator, read the error of a release with dp_query_accuracy.';
END $$;
COMMENT ON FUNCTION dp_error(anyelement, double precision) IS
    'In an analyst''s statement, beside the same plain count, sum, avg, variance or stddev of a protected table: the half-width of the interval around its released value that holds the noiseless value with the confidence (0.95); releases and charges nothing.';

-- The ends of that interval (docs/bi.md, "Errors"): the gate writes the
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

