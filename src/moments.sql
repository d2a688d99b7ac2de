-- Variances: dp_var, dp_stddev (src/moments.rs). Support functions are
-- deterministic (IMMUTABLE) except the final functions, which draw noise
-- (VOLATILE); EXECUTE on them is revoked from PUBLIC (src/finalize.sql).
-- Every SSPACE here is size_of::<VarState>(), checked when the crate compiles.
CREATE FUNCTION dp_var_combine(internal, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'dp_var_combine' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_var_serialize(internal) RETURNS bytea
    AS 'MODULE_PATHNAME', 'dp_var_serialize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION dp_var_deserialize(bytea, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'dp_var_deserialize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION dp_var_step(internal, double precision, double precision, double precision, double precision)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_var_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_stddev_step(internal, double precision, double precision, double precision, double precision)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_stddev_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_var_final(internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_var_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION dp_stddev_final(internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_stddev_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE AGGREGATE dp_var(value double precision, epsilon double precision,
                        lower double precision, upper double precision) (
    SFUNC = dp_var_step, STYPE = internal, SSPACE = 72,
    COMBINEFUNC = dp_var_combine, SERIALFUNC = dp_var_serialize, DESERIALFUNC = dp_var_deserialize,
    FINALFUNC = dp_var_final, PARALLEL = SAFE
);
CREATE AGGREGATE dp_stddev(value double precision, epsilon double precision,
                           lower double precision, upper double precision) (
    SFUNC = dp_stddev_step, STYPE = internal, SSPACE = 72,
    COMBINEFUNC = dp_var_combine, SERIALFUNC = dp_var_serialize, DESERIALFUNC = dp_var_deserialize,
    FINALFUNC = dp_stddev_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_var(double precision, double precision, double precision, double precision) IS
    'Noisy population variance of values clamped to [lower, upper]: centred staircase sums of values and squares, geometric count; in [0, ((upper-lower)/2)^2].';
COMMENT ON AGGREGATE dp_stddev(double precision, double precision, double precision, double precision) IS
    'Square root of dp_var: noisy population standard deviation of values clamped to [lower, upper].';
