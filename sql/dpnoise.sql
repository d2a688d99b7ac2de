-- dpnoise's hand-written SQL: aggregates over V1 C support functions.
-- Support functions are deterministic (IMMUTABLE) except the final
-- functions, which draw noise (VOLATILE). EXECUTE on every support function
-- is revoked from PUBLIC: a role that could build its own aggregate from
-- them (say, the sum transition with the serialize function as final) would
-- read exact answers.

-- dp_count ------------------------------------------------------------------
CREATE FUNCTION dp_count_step(bigint, double precision) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_count_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_count_value_step(bigint, anyelement, double precision) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_count_value_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_count_final(bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_count_final' LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE AGGREGATE dp_count(epsilon double precision) (
    SFUNC = dp_count_step, STYPE = bigint, INITCOND = '0',
    COMBINEFUNC = int8pl, FINALFUNC = dp_count_final, PARALLEL = SAFE
);
CREATE AGGREGATE dp_count(value anyelement, epsilon double precision) (
    SFUNC = dp_count_value_step, STYPE = bigint, INITCOND = '0',
    COMBINEFUNC = int8pl, FINALFUNC = dp_count_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_count(double precision) IS
    'Noisy count of rows: two-sided geometric noise, sensitivity 1, privacy loss epsilon.';
COMMENT ON AGGREGATE dp_count(anyelement, double precision) IS
    'Noisy count of non-NULL values: two-sided geometric noise, sensitivity 1, privacy loss epsilon.';

-- dp_sum_laplace ------------------------------------------------------------
CREATE FUNCTION dp_sum_step(internal, double precision, double precision, double precision, double precision)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_sum_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_int_step(internal, bigint, double precision, bigint, bigint)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_sum_int_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_combine(internal, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'dp_sum_combine' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_serialize(internal) RETURNS bytea
    AS 'MODULE_PATHNAME', 'dp_sum_serialize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION dp_sum_deserialize(bytea, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'dp_sum_deserialize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION dp_sum_final(internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_sum_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION dp_sum_int_final(internal) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_sum_int_final' LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE AGGREGATE dp_sum_laplace(value double precision, epsilon double precision,
                                lower double precision, upper double precision) (
    SFUNC = dp_sum_step, STYPE = internal, SSPACE = 48,
    COMBINEFUNC = dp_sum_combine, SERIALFUNC = dp_sum_serialize, DESERIALFUNC = dp_sum_deserialize,
    FINALFUNC = dp_sum_final, PARALLEL = SAFE
);
CREATE AGGREGATE dp_sum_laplace(value bigint, epsilon double precision, lower bigint, upper bigint) (
    SFUNC = dp_sum_int_step, STYPE = internal, SSPACE = 48,
    COMBINEFUNC = dp_sum_combine, SERIALFUNC = dp_sum_serialize, DESERIALFUNC = dp_sum_deserialize,
    FINALFUNC = dp_sum_int_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_sum_laplace(double precision, double precision, double precision, double precision) IS
    'Noisy sum of values clamped to [lower, upper], summed exactly on a power-of-two lattice, Laplace noise.';
COMMENT ON AGGREGATE dp_sum_laplace(bigint, double precision, bigint, bigint) IS
    'Noisy sum of bigint values clamped to [lower, upper], exact integer sum, two-sided geometric noise.';

-- dp_laplace (per row) --------------------------------------------------------
CREATE FUNCTION dp_laplace(value double precision, epsilon double precision, sensitivity double precision)
    RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_laplace' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION dp_laplace(double precision, double precision, double precision) IS
    'value plus exact lattice Laplace noise of scale sensitivity/epsilon.';

REVOKE EXECUTE ON FUNCTION
    dp_count_step(bigint, double precision),
    dp_count_value_step(bigint, anyelement, double precision),
    dp_count_final(bigint),
    dp_sum_step(internal, double precision, double precision, double precision, double precision),
    dp_sum_int_step(internal, bigint, double precision, bigint, bigint),
    dp_sum_combine(internal, internal),
    dp_sum_serialize(internal),
    dp_sum_deserialize(bytea, internal),
    dp_sum_final(internal),
    dp_sum_int_final(internal)
FROM PUBLIC;

-- CREATE AGGREGATE records every aggregate as IMMUTABLE; ours draw noise.
-- Say so in the catalog, so the planner never treats two calls as one.
UPDATE pg_catalog.pg_proc SET provolatile = 'v'
WHERE oid IN ('dp_count(double precision)'::regprocedure,
              'dp_count(anyelement, double precision)'::regprocedure,
              'dp_sum_laplace(double precision, double precision, double precision, double precision)'::regprocedure,
              'dp_sum_laplace(bigint, double precision, bigint, bigint)'::regprocedure);
