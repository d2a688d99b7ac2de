-- Sums: dp_sum, dp_sum_laplace, dp_sum_staircase, dp_avg (src/sum.rs).
-- Support functions are deterministic (IMMUTABLE) except the final
-- functions, which draw noise (VOLATILE). EXECUTE on every support function
-- is revoked from PUBLIC at the end of the script (src/finalize.sql).
-- Every SSPACE here is size_of::<SumState>(), checked when the crate compiles.

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
    'Noisy average of values clamped to [lower, upper]: centred staircase sum and geometric count, epsilon split to minimise the worst-case error (dp_aggregate_accuracy).';

-- dp_sum: (epsilon, delta) and the automatic choice.
-- PostgreSQL has no defaults (and no named notation) for aggregates, so
-- dp_sum's optional trailing arguments are overloads: positional prefixes
-- of (delta, mechanism, loss).
CREATE FUNCTION dp_sum_final(internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_sum_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION dp_sum_step(internal, double precision, double precision, double precision, double precision)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_sum_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_step(internal, double precision, double precision, double precision, double precision, double precision)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_sum_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_step(internal, double precision, double precision, double precision, double precision, double precision, text)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_sum_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_step(internal, double precision, double precision, double precision, double precision, double precision, text, text)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_sum_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE AGGREGATE dp_sum(value double precision, epsilon double precision, lower double precision, upper double precision) (
    SFUNC = dp_sum_step, STYPE = internal, SSPACE = 56,
    COMBINEFUNC = dp_sum_combine, SERIALFUNC = dp_sum_serialize, DESERIALFUNC = dp_sum_deserialize,
    FINALFUNC = dp_sum_final, PARALLEL = SAFE
);
CREATE AGGREGATE dp_sum(value double precision, epsilon double precision, lower double precision, upper double precision, delta double precision) (
    SFUNC = dp_sum_step, STYPE = internal, SSPACE = 56,
    COMBINEFUNC = dp_sum_combine, SERIALFUNC = dp_sum_serialize, DESERIALFUNC = dp_sum_deserialize,
    FINALFUNC = dp_sum_final, PARALLEL = SAFE
);
CREATE AGGREGATE dp_sum(value double precision, epsilon double precision, lower double precision, upper double precision, delta double precision, mechanism text) (
    SFUNC = dp_sum_step, STYPE = internal, SSPACE = 56,
    COMBINEFUNC = dp_sum_combine, SERIALFUNC = dp_sum_serialize, DESERIALFUNC = dp_sum_deserialize,
    FINALFUNC = dp_sum_final, PARALLEL = SAFE
);
CREATE AGGREGATE dp_sum(value double precision, epsilon double precision, lower double precision, upper double precision, delta double precision, mechanism text, loss text) (
    SFUNC = dp_sum_step, STYPE = internal, SSPACE = 56,
    COMBINEFUNC = dp_sum_combine, SERIALFUNC = dp_sum_serialize, DESERIALFUNC = dp_sum_deserialize,
    FINALFUNC = dp_sum_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_sum(double precision, double precision, double precision, double precision, double precision, text, text) IS
    'Noisy sum of values clamped to [lower, upper] at (epsilon, delta); mechanism auto (default) picks the least expected loss.';

CREATE FUNCTION dp_sum_int_final(internal) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_sum_int_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION dp_sum_int_step(internal, bigint, double precision, bigint, bigint)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_sum_int_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_int_step(internal, bigint, double precision, bigint, bigint, double precision)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_sum_int_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_int_step(internal, bigint, double precision, bigint, bigint, double precision, text)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_sum_int_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_int_step(internal, bigint, double precision, bigint, bigint, double precision, text, text)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_sum_int_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE AGGREGATE dp_sum(value bigint, epsilon double precision, lower bigint, upper bigint) (
    SFUNC = dp_sum_int_step, STYPE = internal, SSPACE = 56,
    COMBINEFUNC = dp_sum_combine, SERIALFUNC = dp_sum_serialize, DESERIALFUNC = dp_sum_deserialize,
    FINALFUNC = dp_sum_int_final, PARALLEL = SAFE
);
CREATE AGGREGATE dp_sum(value bigint, epsilon double precision, lower bigint, upper bigint, delta double precision) (
    SFUNC = dp_sum_int_step, STYPE = internal, SSPACE = 56,
    COMBINEFUNC = dp_sum_combine, SERIALFUNC = dp_sum_serialize, DESERIALFUNC = dp_sum_deserialize,
    FINALFUNC = dp_sum_int_final, PARALLEL = SAFE
);
CREATE AGGREGATE dp_sum(value bigint, epsilon double precision, lower bigint, upper bigint, delta double precision, mechanism text) (
    SFUNC = dp_sum_int_step, STYPE = internal, SSPACE = 56,
    COMBINEFUNC = dp_sum_combine, SERIALFUNC = dp_sum_serialize, DESERIALFUNC = dp_sum_deserialize,
    FINALFUNC = dp_sum_int_final, PARALLEL = SAFE
);
CREATE AGGREGATE dp_sum(value bigint, epsilon double precision, lower bigint, upper bigint, delta double precision, mechanism text, loss text) (
    SFUNC = dp_sum_int_step, STYPE = internal, SSPACE = 56,
    COMBINEFUNC = dp_sum_combine, SERIALFUNC = dp_sum_serialize, DESERIALFUNC = dp_sum_deserialize,
    FINALFUNC = dp_sum_int_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_sum(bigint, double precision, bigint, bigint, double precision, text, text) IS
    'Noisy sum of values clamped to [lower, upper] at (epsilon, delta); mechanism auto (default) picks the least expected loss.';

COMMENT ON AGGREGATE dp_sum(double precision, double precision, double precision, double precision) IS
    'Noisy sum of values clamped to [lower, upper] at epsilon (delta 0); mechanism auto picks the least expected loss.';
COMMENT ON AGGREGATE dp_sum(double precision, double precision, double precision, double precision, double precision) IS
    'Noisy sum of values clamped to [lower, upper] at (epsilon, delta); mechanism auto picks the least expected loss.';
COMMENT ON AGGREGATE dp_sum(double precision, double precision, double precision, double precision, double precision, text) IS
    'Noisy sum of values clamped to [lower, upper] at (epsilon, delta) with the named mechanism (or auto).';
COMMENT ON AGGREGATE dp_sum(bigint, double precision, bigint, bigint) IS
    'Noisy sum of bigint values clamped to [lower, upper] at epsilon (delta 0); mechanism auto picks the least expected loss.';
COMMENT ON AGGREGATE dp_sum(bigint, double precision, bigint, bigint, double precision) IS
    'Noisy sum of bigint values clamped to [lower, upper] at (epsilon, delta); mechanism auto picks the least expected loss.';
COMMENT ON AGGREGATE dp_sum(bigint, double precision, bigint, bigint, double precision, text) IS
    'Noisy sum of bigint values clamped to [lower, upper] at (epsilon, delta) with the named mechanism (or auto).';
