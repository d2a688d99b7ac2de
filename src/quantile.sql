-- Quantiles: dp_quantile, dp_median, dp_min, dp_max (src/quantile.rs).
-- The state keeps every value (8 bytes a row). Support functions are
-- deterministic (IMMUTABLE) except the final functions, which draw noise
-- (VOLATILE); EXECUTE on them is revoked from PUBLIC (src/finalize.sql).
CREATE FUNCTION dp_quantile_combine(internal, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'dp_quantile_combine' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_quantile_serialize(internal) RETURNS bytea
    AS 'MODULE_PATHNAME', 'dp_quantile_serialize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION dp_quantile_deserialize(bytea, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'dp_quantile_deserialize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION dp_quantile_step(internal, double precision, double precision, double precision, double precision, double precision)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_quantile_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_median_step(internal, double precision, double precision, double precision, double precision)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_median_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_min_step(internal, double precision, double precision, double precision, double precision)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_min_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_max_step(internal, double precision, double precision, double precision, double precision)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_max_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_quantile_final(internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_quantile_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION dp_median_final(internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_median_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION dp_min_final(internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_min_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION dp_max_final(internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_max_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE AGGREGATE dp_quantile(value double precision, epsilon double precision,
                             lower double precision, upper double precision, p double precision) (
    SFUNC = dp_quantile_step, STYPE = internal, SSPACE = 8192,
    COMBINEFUNC = dp_quantile_combine, SERIALFUNC = dp_quantile_serialize, DESERIALFUNC = dp_quantile_deserialize,
    FINALFUNC = dp_quantile_final, PARALLEL = SAFE
);
CREATE AGGREGATE dp_median(value double precision, epsilon double precision,
                           lower double precision, upper double precision) (
    SFUNC = dp_median_step, STYPE = internal, SSPACE = 8192,
    COMBINEFUNC = dp_quantile_combine, SERIALFUNC = dp_quantile_serialize, DESERIALFUNC = dp_quantile_deserialize,
    FINALFUNC = dp_median_final, PARALLEL = SAFE
);
CREATE AGGREGATE dp_min(value double precision, epsilon double precision,
                        lower double precision, upper double precision) (
    SFUNC = dp_min_step, STYPE = internal, SSPACE = 8192,
    COMBINEFUNC = dp_quantile_combine, SERIALFUNC = dp_quantile_serialize, DESERIALFUNC = dp_quantile_deserialize,
    FINALFUNC = dp_min_final, PARALLEL = SAFE
);
CREATE AGGREGATE dp_max(value double precision, epsilon double precision,
                        lower double precision, upper double precision) (
    SFUNC = dp_max_step, STYPE = internal, SSPACE = 8192,
    COMBINEFUNC = dp_quantile_combine, SERIALFUNC = dp_quantile_serialize, DESERIALFUNC = dp_quantile_deserialize,
    FINALFUNC = dp_max_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_quantile(double precision, double precision, double precision, double precision, double precision) IS
    'Noisy p-quantile of values clamped to [lower, upper]: exact exponential mechanism over a 2^32-point lattice (utility -|rank - p n|).';
COMMENT ON AGGREGATE dp_median(double precision, double precision, double precision, double precision) IS
    'dp_quantile at p = 0.5.';
COMMENT ON AGGREGATE dp_min(double precision, double precision, double precision, double precision) IS
    'dp_quantile at p = 0.01: a private low percentile, not the exact minimum.';
COMMENT ON AGGREGATE dp_max(double precision, double precision, double precision, double precision) IS
    'dp_quantile at p = 0.99: a private high percentile, not the exact maximum.';
