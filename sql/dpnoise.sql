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
CREATE FUNCTION dp_count_step(bigint, double precision, text) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_count_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_count_final(bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_count_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION dp_count_mechanism_final(bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_count_mechanism_final' LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE AGGREGATE dp_count(epsilon double precision) (
    SFUNC = dp_count_step, STYPE = bigint, INITCOND = '0',
    COMBINEFUNC = int8pl, FINALFUNC = dp_count_final, PARALLEL = SAFE
);
CREATE AGGREGATE dp_count(value anyelement, epsilon double precision) (
    SFUNC = dp_count_value_step, STYPE = bigint, INITCOND = '0',
    COMBINEFUNC = int8pl, FINALFUNC = dp_count_final, PARALLEL = SAFE
);
CREATE AGGREGATE dp_count(epsilon double precision, mechanism text) (
    SFUNC = dp_count_step, STYPE = bigint, INITCOND = '0',
    COMBINEFUNC = int8pl, FINALFUNC = dp_count_mechanism_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_count(double precision, text) IS
    'Noisy count of rows with the named mechanism: laplace or staircase (the same law at sensitivity 1).';
COMMENT ON AGGREGATE dp_count(double precision) IS
    'Noisy count of rows: two-sided geometric noise, sensitivity 1, privacy loss epsilon.';
COMMENT ON AGGREGATE dp_count(anyelement, double precision) IS
    'Noisy count of non-NULL values: two-sided geometric noise, sensitivity 1, privacy loss epsilon.';

-- Sums: dp_sum_laplace, dp_sum_staircase, dp_avg ------------------------------
-- All share one exact lattice state (internal), its combine and (de)serialize.
CREATE FUNCTION dp_sum_combine(internal, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'dp_sum_combine' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_serialize(internal) RETURNS bytea
    AS 'MODULE_PATHNAME', 'dp_sum_serialize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION dp_sum_deserialize(bytea, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'dp_sum_deserialize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION dp_sum_laplace_step(internal, double precision, double precision, double precision, double precision)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_sum_laplace_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_laplace_int_step(internal, bigint, double precision, bigint, bigint)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_sum_laplace_int_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_laplace_final(internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_sum_laplace_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION dp_sum_laplace_int_final(internal) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_sum_laplace_int_final' LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE AGGREGATE dp_sum_laplace(value double precision, epsilon double precision,
                                lower double precision, upper double precision) (
    SFUNC = dp_sum_laplace_step, STYPE = internal, SSPACE = 56,
    COMBINEFUNC = dp_sum_combine, SERIALFUNC = dp_sum_serialize, DESERIALFUNC = dp_sum_deserialize,
    FINALFUNC = dp_sum_laplace_final, PARALLEL = SAFE
);
CREATE AGGREGATE dp_sum_laplace(value bigint, epsilon double precision, lower bigint, upper bigint) (
    SFUNC = dp_sum_laplace_int_step, STYPE = internal, SSPACE = 56,
    COMBINEFUNC = dp_sum_combine, SERIALFUNC = dp_sum_serialize, DESERIALFUNC = dp_sum_deserialize,
    FINALFUNC = dp_sum_laplace_int_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_sum_laplace(double precision, double precision, double precision, double precision) IS
    'Noisy sum of values clamped to [lower, upper], summed exactly on a power-of-two lattice, Laplace noise.';
COMMENT ON AGGREGATE dp_sum_laplace(bigint, double precision, bigint, bigint) IS
    'Noisy sum of bigint values clamped to [lower, upper], exact integer sum, two-sided geometric noise.';

-- The same C step serves the forms with and without the loss argument.
CREATE FUNCTION dp_sum_staircase_step(internal, double precision, double precision, double precision)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_sum_staircase_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_staircase_step(internal, double precision, double precision, double precision, text)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_sum_staircase_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_staircase_int_step(internal, bigint, double precision, bigint)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_sum_staircase_int_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_staircase_int_step(internal, bigint, double precision, bigint, text)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_sum_staircase_int_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_staircase_final(internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_sum_staircase_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION dp_sum_staircase_int_final(internal) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_sum_staircase_int_final' LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE AGGREGATE dp_sum_staircase(value double precision, epsilon double precision, sensitivity double precision) (
    SFUNC = dp_sum_staircase_step, STYPE = internal, SSPACE = 56,
    COMBINEFUNC = dp_sum_combine, SERIALFUNC = dp_sum_serialize, DESERIALFUNC = dp_sum_deserialize,
    FINALFUNC = dp_sum_staircase_final, PARALLEL = SAFE
);
CREATE AGGREGATE dp_sum_staircase(value double precision, epsilon double precision, sensitivity double precision, loss text) (
    SFUNC = dp_sum_staircase_step, STYPE = internal, SSPACE = 56,
    COMBINEFUNC = dp_sum_combine, SERIALFUNC = dp_sum_serialize, DESERIALFUNC = dp_sum_deserialize,
    FINALFUNC = dp_sum_staircase_final, PARALLEL = SAFE
);
CREATE AGGREGATE dp_sum_staircase(value bigint, epsilon double precision, sensitivity bigint) (
    SFUNC = dp_sum_staircase_int_step, STYPE = internal, SSPACE = 56,
    COMBINEFUNC = dp_sum_combine, SERIALFUNC = dp_sum_serialize, DESERIALFUNC = dp_sum_deserialize,
    FINALFUNC = dp_sum_staircase_int_final, PARALLEL = SAFE
);
CREATE AGGREGATE dp_sum_staircase(value bigint, epsilon double precision, sensitivity bigint, loss text) (
    SFUNC = dp_sum_staircase_int_step, STYPE = internal, SSPACE = 56,
    COMBINEFUNC = dp_sum_combine, SERIALFUNC = dp_sum_serialize, DESERIALFUNC = dp_sum_deserialize,
    FINALFUNC = dp_sum_staircase_int_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_sum_staircase(double precision, double precision, double precision) IS
    'Noisy sum of values clamped to [-sensitivity, sensitivity], exact lattice sum, staircase noise (loss l2).';
COMMENT ON AGGREGATE dp_sum_staircase(double precision, double precision, double precision, text) IS
    'Noisy sum of values clamped to [-sensitivity, sensitivity], staircase noise with gamma chosen by loss.';
COMMENT ON AGGREGATE dp_sum_staircase(bigint, double precision, bigint) IS
    'Noisy sum of bigint values clamped to [-sensitivity, sensitivity], discrete staircase noise (loss l2).';
COMMENT ON AGGREGATE dp_sum_staircase(bigint, double precision, bigint, text) IS
    'Noisy sum of bigint values clamped to [-sensitivity, sensitivity], discrete staircase, gamma by loss.';

CREATE FUNCTION dp_avg_step(internal, double precision, double precision, double precision, double precision)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_avg_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_avg_final(internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_avg_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE AGGREGATE dp_avg(value double precision, epsilon double precision,
                        lower double precision, upper double precision) (
    SFUNC = dp_avg_step, STYPE = internal, SSPACE = 56,
    COMBINEFUNC = dp_sum_combine, SERIALFUNC = dp_sum_serialize, DESERIALFUNC = dp_sum_deserialize,
    FINALFUNC = dp_avg_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_avg(double precision, double precision, double precision, double precision) IS
    'Noisy average: staircase sum (epsilon/2) over geometric count (epsilon/2), clamped to [lower, upper].';

-- dp_laplace (per row) --------------------------------------------------------
CREATE FUNCTION dp_laplace(value double precision, epsilon double precision, sensitivity double precision)
    RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_laplace' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION dp_laplace(double precision, double precision, double precision) IS
    'value plus exact lattice Laplace noise of scale sensitivity/epsilon.';

CREATE FUNCTION dp_staircase(value double precision, epsilon double precision, sensitivity double precision)
    RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_staircase' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION dp_staircase(value double precision, epsilon double precision, sensitivity double precision, loss text)
    RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_staircase' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION dp_staircase(double precision, double precision, double precision) IS
    'value plus exact lattice staircase noise, gamma for minimum variance (l2).';
COMMENT ON FUNCTION dp_staircase(double precision, double precision, double precision, text) IS
    'value plus exact lattice staircase noise, gamma chosen by loss: l1, l2, ci, ci=<c>, gamma=<g>.';

REVOKE EXECUTE ON FUNCTION
    dp_count_step(bigint, double precision),
    dp_count_step(bigint, double precision, text),
    dp_count_value_step(bigint, anyelement, double precision),
    dp_count_final(bigint),
    dp_count_mechanism_final(bigint),
    dp_sum_combine(internal, internal),
    dp_sum_serialize(internal),
    dp_sum_deserialize(bytea, internal),
    dp_sum_laplace_step(internal, double precision, double precision, double precision, double precision),
    dp_sum_laplace_int_step(internal, bigint, double precision, bigint, bigint),
    dp_sum_laplace_final(internal),
    dp_sum_laplace_int_final(internal),
    dp_sum_staircase_step(internal, double precision, double precision, double precision),
    dp_sum_staircase_step(internal, double precision, double precision, double precision, text),
    dp_sum_staircase_int_step(internal, bigint, double precision, bigint),
    dp_sum_staircase_int_step(internal, bigint, double precision, bigint, text),
    dp_sum_staircase_final(internal),
    dp_sum_staircase_int_final(internal),
    dp_avg_step(internal, double precision, double precision, double precision, double precision),
    dp_avg_final(internal)
FROM PUBLIC;

-- CREATE AGGREGATE records every aggregate as IMMUTABLE; ours draw noise.
-- Say so in the catalog, so the planner never treats two calls as one.
UPDATE pg_catalog.pg_proc SET provolatile = 'v'
WHERE oid IN ('dp_count(double precision)'::regprocedure,
              'dp_count(double precision, text)'::regprocedure,
              'dp_count(anyelement, double precision)'::regprocedure,
              'dp_sum_laplace(double precision, double precision, double precision, double precision)'::regprocedure,
              'dp_sum_laplace(bigint, double precision, bigint, bigint)'::regprocedure,
              'dp_sum_staircase(double precision, double precision, double precision)'::regprocedure,
              'dp_sum_staircase(double precision, double precision, double precision, text)'::regprocedure,
              'dp_sum_staircase(bigint, double precision, bigint)'::regprocedure,
              'dp_sum_staircase(bigint, double precision, bigint, text)'::regprocedure,
              'dp_avg(double precision, double precision, double precision, double precision)'::regprocedure);
