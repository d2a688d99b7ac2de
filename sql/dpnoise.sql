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

-- (epsilon, delta) and automatic choice: dp_count(epsilon, delta, mechanism), dp_sum
-- PostgreSQL has no defaults (and no named notation) for aggregates, so
-- dp_sum's optional trailing arguments are overloads: positional prefixes
-- of (delta, mechanism, loss).
CREATE FUNCTION dp_count_step(bigint, double precision, double precision, text) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_count_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_count_delta_final(bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_count_delta_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE AGGREGATE dp_count(epsilon double precision, delta double precision, mechanism text) (
    SFUNC = dp_count_step, STYPE = bigint, INITCOND = '0',
    COMBINEFUNC = int8pl, FINALFUNC = dp_count_delta_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_count(double precision, double precision, text) IS
    'Noisy count of rows at (epsilon, delta): laplace, staircase, truncated_laplace, uniform, gaussian, or auto (least variance).';

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

-- dp_noise (per row, any mechanism) ------------------------------------------
CREATE FUNCTION dp_noise(value double precision, epsilon double precision, sensitivity double precision,
                         delta double precision DEFAULT 0, mechanism text DEFAULT 'auto', loss text DEFAULT 'l2')
    RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_noise' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION dp_noise(double precision, double precision, double precision, double precision, text, text) IS
    'value plus exact lattice noise of any mechanism at (epsilon, delta); auto picks the least expected loss.';

-- dp_sum_multi (several sums released together with box noise) -------------
CREATE FUNCTION dp_sum_multi_step(internal, double precision[], double precision, double precision[])
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_sum_multi_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_multi_final(internal) RETURNS double precision[]
    AS 'MODULE_PATHNAME', 'dp_sum_multi_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION dp_sum_multi_combine(internal, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'dp_sum_multi_combine' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_multi_serialize(internal) RETURNS bytea
    AS 'MODULE_PATHNAME', 'dp_sum_multi_serialize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION dp_sum_multi_deserialize(bytea, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'dp_sum_multi_deserialize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE AGGREGATE dp_sum_multi("values" double precision[], epsilon double precision, bounds double precision[]) (
    SFUNC = dp_sum_multi_step, STYPE = internal, SSPACE = 540,
    COMBINEFUNC = dp_sum_multi_combine, SERIALFUNC = dp_sum_multi_serialize,
    DESERIALFUNC = dp_sum_multi_deserialize, FINALFUNC = dp_sum_multi_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_sum_multi(double precision[], double precision, double precision[]) IS
    'Component-wise sums of vectors clamped to [-bound_j, bound_j], released together with box noise (Soria-Comas & Domingo-Ferrer): one charge of epsilon.';

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
    dp_count_step(bigint, double precision, double precision, text),
    dp_count_delta_final(bigint),
    dp_sum_final(internal),
    dp_sum_int_final(internal),
    dp_sum_step(internal, double precision, double precision, double precision, double precision),
    dp_sum_step(internal, double precision, double precision, double precision, double precision, double precision),
    dp_sum_step(internal, double precision, double precision, double precision, double precision, double precision, text),
    dp_sum_step(internal, double precision, double precision, double precision, double precision, double precision, text, text),
    dp_sum_int_step(internal, bigint, double precision, bigint, bigint),
    dp_sum_int_step(internal, bigint, double precision, bigint, bigint, double precision),
    dp_sum_int_step(internal, bigint, double precision, bigint, bigint, double precision, text),
    dp_sum_int_step(internal, bigint, double precision, bigint, bigint, double precision, text, text),
    dp_sum_multi_step(internal, double precision[], double precision, double precision[]),
    dp_sum_multi_final(internal),
    dp_sum_multi_combine(internal, internal),
    dp_sum_multi_serialize(internal),
    dp_sum_multi_deserialize(bytea, internal),
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
              'dp_count(double precision, double precision, text)'::regprocedure,
              'dp_sum(double precision, double precision, double precision, double precision)'::regprocedure,
              'dp_sum(double precision, double precision, double precision, double precision, double precision)'::regprocedure,
              'dp_sum(double precision, double precision, double precision, double precision, double precision, text)'::regprocedure,
              'dp_sum(double precision, double precision, double precision, double precision, double precision, text, text)'::regprocedure,
              'dp_sum(bigint, double precision, bigint, bigint)'::regprocedure,
              'dp_sum(bigint, double precision, bigint, bigint, double precision)'::regprocedure,
              'dp_sum(bigint, double precision, bigint, bigint, double precision, text)'::regprocedure,
              'dp_sum(bigint, double precision, bigint, bigint, double precision, text, text)'::regprocedure,
              'dp_sum_multi(double precision[], double precision, double precision[])'::regprocedure,
              'dp_avg(double precision, double precision, double precision, double precision)'::regprocedure);

-- The privacy budget -------------------------------------------------------
-- docs/budget.md explains the design. In short: a release asks the ledger
-- worker (a background worker per database) to charge it; the worker
-- commits the charge in its own transaction, synchronously, before the
-- release is computed. The caller's ROLLBACK cannot undo that commit.
-- Amounts are numeric: the exact decimals the user wrote.
CREATE SCHEMA dpnoise;
REVOKE ALL ON SCHEMA dpnoise FROM PUBLIC;

-- Granted amounts, written by dp_budget_grant and friends only.
CREATE TABLE dpnoise.budget (
    role    regrole PRIMARY KEY,
    epsilon numeric NOT NULL CHECK (epsilon >= 0),
    delta   numeric NOT NULL CHECK (delta >= 0),
    strict  boolean NOT NULL DEFAULT false
);
-- Spent amounts, written by the ledger worker only (never by a grant, so a
-- session that grants and then releases in one transaction cannot make the
-- worker wait for its own row lock).
CREATE TABLE dpnoise.spent (
    role    regrole PRIMARY KEY,
    epsilon numeric NOT NULL DEFAULT 0,
    delta   numeric NOT NULL DEFAULT 0
);
-- An optional cap on what all roles together may spend in this database.
CREATE TABLE dpnoise.global_cap (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    epsilon   numeric NOT NULL CHECK (epsilon >= 0),
    delta     numeric NOT NULL CHECK (delta >= 0)
);
-- Never holds a row: charge_batch locks it so that two ledger workers of one
-- database never interleave. No role but a superuser can take this lock,
-- where an advisory lock could be taken (and held) by any role.
CREATE TABLE dpnoise.charge_lock ();
-- One row per charge.
CREATE TABLE dpnoise.ledger (
    id         bigserial PRIMARY KEY,
    role       regrole NOT NULL,
    charged_at timestamptz NOT NULL,
    statement  text,
    mechanism  text NOT NULL,
    epsilon    numeric NOT NULL,
    delta      numeric NOT NULL,
    releases   bigint NOT NULL,
    pid        integer NOT NULL
);
CREATE INDEX ON dpnoise.ledger (role, id);
SELECT pg_catalog.pg_extension_config_dump('dpnoise.budget', '');
SELECT pg_catalog.pg_extension_config_dump('dpnoise.spent', '');
SELECT pg_catalog.pg_extension_config_dump('dpnoise.global_cap', '');
SELECT pg_catalog.pg_extension_config_dump('dpnoise.ledger', '');
SELECT pg_catalog.pg_extension_config_dump('dpnoise.ledger_id_seq', '');

-- Called by the ledger worker (as the bootstrap superuser) once per batch
-- of requests, in request order; it answers each only after the commit.
-- Request i asks releases[i] releases at (epsilons[i], deltas[i]) each; it
-- is granted if what remains of its role's budget (and of the global cap,
-- if any) covers it. Only the worker writes dpnoise.spent, and the lock on
-- dpnoise.charge_lock keeps even two workers of one database from interleaving,
-- so reading then updating cannot race.
CREATE FUNCTION dpnoise.charge_batch(
    requesters oid[], epsilons numeric[], deltas numeric[], releases bigint[],
    mechanisms text[], statements text[], pids integer[])
RETURNS TABLE (granted boolean, is_strict boolean, remaining_epsilon numeric, remaining_delta numeric)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    roles oid[];
    left_epsilon numeric[];
    left_delta numeric[];
    strict_of boolean[];
    capped boolean;
    cap_epsilon numeric;
    cap_delta numeric;
    g boolean[] := '{}';
    st boolean[] := '{}';
    re numeric[] := '{}';
    rd numeric[] := '{}';
    cost_epsilon numeric;
    cost_delta numeric;
    j integer;
BEGIN
    LOCK TABLE dpnoise.charge_lock IN EXCLUSIVE MODE;
    SELECT array_agg(x.r ORDER BY x.r), array_agg(b.epsilon - p.epsilon ORDER BY x.r),
           array_agg(b.delta - p.delta ORDER BY x.r), array_agg(b.strict ORDER BY x.r)
    INTO roles, left_epsilon, left_delta, strict_of
    FROM (SELECT DISTINCT unnest(requesters) AS r) x
    LEFT JOIN dpnoise.budget b ON b.role = x.r
    LEFT JOIN dpnoise.spent p ON p.role = x.r;
    SELECT c.epsilon - (SELECT sum(s.epsilon) FROM dpnoise.spent s), c.delta - (SELECT sum(s.delta) FROM dpnoise.spent s)
    INTO cap_epsilon, cap_delta FROM dpnoise.global_cap c;
    capped := FOUND;
    FOR i IN 1 .. cardinality(requesters) LOOP
        j := array_position(roles, requesters[i]);
        IF left_epsilon[j] IS NULL THEN
            -- No budget (never granted, or revoked).
            g[i] := false; st[i] := false; re[i] := 0; rd[i] := 0;
            CONTINUE;
        END IF;
        cost_epsilon := epsilons[i] * releases[i];
        cost_delta := deltas[i] * releases[i];
        st[i] := strict_of[j];
        g[i] := cost_epsilon <= left_epsilon[j] AND cost_delta <= left_delta[j]
                AND (NOT capped OR (cost_epsilon <= cap_epsilon AND cost_delta <= cap_delta));
        IF g[i] THEN
            left_epsilon[j] := left_epsilon[j] - cost_epsilon;
            left_delta[j] := left_delta[j] - cost_delta;
            cap_epsilon := cap_epsilon - cost_epsilon;
            cap_delta := cap_delta - cost_delta;
        END IF;
        re[i] := CASE WHEN capped THEN least(left_epsilon[j], cap_epsilon) ELSE left_epsilon[j] END;
        rd[i] := CASE WHEN capped THEN least(left_delta[j], cap_delta) ELSE left_delta[j] END;
    END LOOP;
    UPDATE dpnoise.spent p SET epsilon = p.epsilon + c.e, delta = p.delta + c.d
    FROM (SELECT requesters[k] AS r, sum(epsilons[k] * releases[k]) AS e, sum(deltas[k] * releases[k]) AS d
          FROM generate_subscripts(requesters, 1) k WHERE g[k] GROUP BY 1) c
    WHERE p.role = c.r;
    INSERT INTO dpnoise.ledger (role, charged_at, statement, mechanism, epsilon, delta, releases, pid)
    SELECT requesters[k], clock_timestamp(), statements[k], mechanisms[k], epsilons[k], deltas[k], releases[k], pids[k]
    FROM generate_subscripts(requesters, 1) k WHERE g[k] ORDER BY k;
    RETURN QUERY SELECT g[k], st[k], re[k], rd[k] FROM generate_subscripts(requesters, 1) k ORDER BY k;
END $$;

-- Checks a granted amount: finite, not negative, not NULL (SQLSTATE 22023).
CREATE FUNCTION dpnoise.amount(name text, value double precision, upper double precision) RETURNS numeric
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp SET extra_float_digits = 1 AS $$
BEGIN
    IF value IS NULL OR value = 'NaN'::float8 OR value = 'Infinity'::float8 OR value < 0 OR value > upper THEN
        RAISE EXCEPTION '% must be %, got %', name,
            CASE WHEN upper IS NULL THEN 'a finite number >= 0' ELSE format('a number in [0, %s]', upper) END,
            coalesce(value::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- float8 text is the shortest decimal that reads back: 0.1, not 0.1000000000000000055.
    RETURN value::text::numeric;
END $$;

CREATE FUNCTION dpnoise.existing_role(role regrole) RETURNS regrole
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.oid = role) THEN
        RAISE EXCEPTION 'role with OID % does not exist', role::oid USING ERRCODE = 'undefined_object';
    END IF;
    RETURN role;
END $$;

CREATE FUNCTION dp_budget_grant(role regrole, epsilon double precision, delta double precision DEFAULT 0)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r regrole := dpnoise.existing_role($1);
    e numeric := dpnoise.amount('epsilon', $2, NULL);
    d numeric := dpnoise.amount('delta', $3, 1);
BEGIN
    INSERT INTO dpnoise.spent AS p (role) VALUES (r) ON CONFLICT DO NOTHING;
    -- A new budget starts at what was already spent: it adds e to what remains.
    INSERT INTO dpnoise.budget AS b (role, epsilon, delta)
    SELECT r, p.epsilon + e, p.delta + d FROM dpnoise.spent p WHERE p.role = r
    ON CONFLICT ON CONSTRAINT budget_pkey DO UPDATE SET epsilon = b.epsilon + e, delta = b.delta + d;
END $$;
COMMENT ON FUNCTION dp_budget_grant(regrole, double precision, double precision) IS
    'Adds epsilon and delta to what a role may still spend. Superusers, and roles granted EXECUTE on it.';

CREATE FUNCTION dp_budget_revoke(role regrole) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM dpnoise.budget b WHERE b.role = dpnoise.existing_role($1);
END $$;
COMMENT ON FUNCTION dp_budget_revoke(regrole) IS
    'Removes a role''s budget: every later release by it is refused. What it spent stays in the ledger.';

CREATE FUNCTION dp_budget_set_strict(role regrole, strict boolean DEFAULT true) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF $2 IS NULL THEN
        RAISE EXCEPTION 'strict must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dpnoise.budget b SET strict = $2 WHERE b.role = dpnoise.existing_role($1);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'role % has no budget', $1 USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Grant one first with dp_budget_grant.';
    END IF;
END $$;
COMMENT ON FUNCTION dp_budget_set_strict(regrole, boolean) IS
    'Strict roles pay for every group and every row released, assuming nothing about who is in them.';

CREATE FUNCTION dp_budget_set_global(epsilon double precision, delta double precision DEFAULT 0) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF $1 IS NULL THEN
        DELETE FROM dpnoise.global_cap;
        RETURN;
    END IF;
    INSERT INTO dpnoise.global_cap AS g (epsilon, delta)
    VALUES (dpnoise.amount('epsilon', $1, NULL), dpnoise.amount('delta', $2, 1))
    ON CONFLICT (singleton) DO UPDATE SET epsilon = excluded.epsilon, delta = excluded.delta;
END $$;
COMMENT ON FUNCTION dp_budget_set_global(double precision, double precision) IS
    'Caps what all roles together may spend in this database (NULL removes the cap).';

REVOKE EXECUTE ON FUNCTION dpnoise.charge_batch(oid[], numeric[], numeric[], bigint[], text[], text[], integer[]),
    dpnoise.amount(text, double precision, double precision),
    dpnoise.existing_role(regrole),
    dp_budget_grant(regrole, double precision, double precision),
    dp_budget_revoke(regrole),
    dp_budget_set_strict(regrole, boolean),
    dp_budget_set_global(double precision, double precision)
FROM PUBLIC;

-- What the DBA sees: every role's budget.
CREATE VIEW dp_budgets AS
SELECT b.role, b.strict,
       b.epsilon AS epsilon_granted, coalesce(p.epsilon, 0) AS epsilon_spent,
       b.epsilon - coalesce(p.epsilon, 0) AS epsilon_remaining,
       b.delta AS delta_granted, coalesce(p.delta, 0) AS delta_spent,
       b.delta - coalesce(p.delta, 0) AS delta_remaining,
       -- A dropped role's budget and charges stay; its name does not.
       coalesce(r.rolname::text, 'dropped role ' || b.role::oid) AS role_name
FROM dpnoise.budget b LEFT JOIN dpnoise.spent p ON p.role = b.role
LEFT JOIN pg_catalog.pg_roles r ON r.oid = b.role;

-- What an analyst sees: their own row and their own charges. Charges go to
-- current_user (the role SET ROLE chose; SECURITY DEFINER functions do not
-- change who pays). security_barrier keeps leaky functions in a caller's
-- WHERE clause from seeing other roles' rows.
CREATE VIEW dp_my_budget WITH (security_barrier) AS
SELECT * FROM dp_budgets WHERE role = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user)::regrole;
CREATE VIEW dp_my_ledger WITH (security_barrier) AS
SELECT l.id, l.charged_at, l.statement, l.mechanism, l.epsilon, l.delta, l.releases
FROM dpnoise.ledger l
WHERE l.role = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user)::regrole;
GRANT SELECT ON dp_my_budget, dp_my_ledger TO PUBLIC;

CREATE FUNCTION dp_budget_remaining(OUT epsilon double precision, OUT delta double precision)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce((SELECT m.epsilon_remaining FROM @extschema@.dp_my_budget m), 0)::float8,
           coalesce((SELECT m.delta_remaining FROM @extschema@.dp_my_budget m), 0)::float8
$$;
COMMENT ON FUNCTION dp_budget_remaining() IS 'What the calling role may still spend (0, 0 without a budget).';

-- Comments: every object of the extension says what it is (\df+, \dT+, \dv+).
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
COMMENT ON FUNCTION dp_accuracy(text, double precision, double precision, text, double precision, double precision) IS
    'Exact error of a mechanism before spending: mean |error|, standard deviation, half-width of the confidence interval. Spends nothing.';
COMMENT ON FUNCTION dp_accuracy_multi(double precision, double precision[], double precision[]) IS
    'Exact figures of box noise before spending: per-component variances, inner half-widths, volumes holding 90/95/99 %. Spends nothing.';
COMMENT ON FUNCTION dp_noise_box(double precision[], double precision, double precision[], double precision[]) IS
    'values plus box noise (Soria-Comas & Domingo-Ferrer, Theorem 13) for per-component sensitivities: one charge of epsilon.';
COMMENT ON FUNCTION dp_noise_l1_staircase(double precision[], double precision, double precision) IS
    'Two values plus Geng''s two-dimensional staircase noise for an L1 sensitivity: one charge of epsilon.';
COMMENT ON FUNCTION dp_prior_uniform(double precision, double precision) IS 'A prior uniform on [lower, upper], for dp_refine.';
COMMENT ON FUNCTION dp_prior_histogram(double precision[], double precision[]) IS
    'A piecewise uniform prior: weights[i] on [edges[i], edges[i+1]), normalised; for dp_refine.';
COMMENT ON FUNCTION dp_prior_normal(double precision, double precision, double precision, double precision) IS
    'A normal prior (mean, sd) truncated to [lower, upper], for dp_refine.';
COMMENT ON FUNCTION dp_prior_categorical(text[], double precision[]) IS
    'A prior over a finite set of categories with their probabilities (normalised), for dp_refine on text.';
COMMENT ON FUNCTION dp_refine(double precision, dp_prior, double precision, boolean) IS
    'A draw from the prior sharpened around value (knowledge refinement, Soria-Comas & Domingo-Ferrer) at epsilon; NULL value: NULL, nothing charged.';
COMMENT ON FUNCTION dp_refine(text, dp_prior, double precision, boolean) IS
    'A category drawn from a categorical prior sharpened towards value at epsilon; with a numeric prior, a constant value is read as a number.';
COMMENT ON FUNCTION dp_prior_in(cstring) IS 'Input function of dp_prior: its JSON text form, checked like the constructors.';
COMMENT ON FUNCTION dp_prior_out(dp_prior) IS 'Output function of dp_prior: its JSON text form.';
ALTER TYPE dp_prior SET (SEND = dp_prior_send, RECEIVE = dp_prior_recv);
COMMENT ON FUNCTION dp_prior_send(dp_prior) IS 'Binary output function of dp_prior: a version byte, then its JSON text.';
COMMENT ON FUNCTION dp_prior_recv(internal) IS 'Binary input function of dp_prior, checked like the text input.';
COMMENT ON TYPE dp_prior IS 'A prior over a query''s answer, for dp_refine; text form JSON ({"kind":"histogram","edges":[0,120],"weights":[1]}).';
COMMENT ON SCHEMA dpnoise IS 'dpnoise''s budget and ledger: superusers only.';
COMMENT ON TABLE dpnoise.budget IS 'What each role was granted (epsilon, delta) and whether it is strict; written by the dp_budget_* functions.';
COMMENT ON TABLE dpnoise.spent IS 'What each role has spent; written by the ledger worker only.';
COMMENT ON TABLE dpnoise.global_cap IS 'An optional cap on what all roles together may spend in this database.';
COMMENT ON TABLE dpnoise.ledger IS 'One row per charge, committed before the release it pays for.';
COMMENT ON SEQUENCE dpnoise.ledger_id_seq IS 'Numbers the ledger''s charges.';
COMMENT ON TABLE dpnoise.charge_lock IS 'Never holds a row: the ledger workers lock it to charge one batch at a time.';
COMMENT ON FUNCTION dpnoise.charge_batch(oid[], numeric[], numeric[], bigint[], text[], text[], integer[]) IS
    'Charges a batch of releases; called by the ledger worker only.';
COMMENT ON FUNCTION dpnoise.amount(text, double precision, double precision) IS 'Checks a granted amount and returns it as the exact decimal written.';
COMMENT ON FUNCTION dpnoise.existing_role(regrole) IS 'Checks that a role exists (42704 otherwise).';
COMMENT ON VIEW dp_budgets IS 'Every role''s budget: granted, spent and remaining epsilon and delta. Superusers only.';
COMMENT ON VIEW dp_my_budget IS 'The calling role''s own budget row.';
COMMENT ON VIEW dp_my_ledger IS 'The calling role''s own charges.';
-- Support functions: named after the aggregates they serve, from the catalog.
DO $$
DECLARE
    f record;
BEGIN
    FOR f IN
        SELECT s.fn, string_agg(DISTINCT a.aggfnoid::regproc::text, ', ') AS aggregates, min(s.role) AS role
        FROM pg_catalog.pg_aggregate a,
             LATERAL (VALUES (a.aggtransfn, 'transition'), (a.aggfinalfn, 'final'), (a.aggcombinefn, 'combine'),
                             (a.aggserialfn, 'serialize'), (a.aggdeserialfn, 'deserialize')) s(fn, role)
        JOIN pg_catalog.pg_depend d ON d.objid = s.fn AND d.classid = 'pg_catalog.pg_proc'::regclass AND d.deptype = 'e'
        JOIN pg_catalog.pg_extension x ON x.oid = d.refobjid AND x.extname = 'dpnoise'
        GROUP BY s.fn
    LOOP
        EXECUTE format('COMMENT ON FUNCTION %s IS %L', f.fn::regprocedure,
                       format('Support function (%s) of %s; not for direct use (revoked from PUBLIC).', f.role, f.aggregates));
    END LOOP;
END $$;

-- Without dpnoise in shared_preload_libraries nothing can be charged, so
-- every release would fail: say so now, with the fix.
DO $$
BEGIN
    IF NOT 'dpnoise' = ANY (pg_catalog.string_to_array(
            pg_catalog.replace(pg_catalog.current_setting('shared_preload_libraries'), ' ', ''), ',')) THEN
        RAISE WARNING 'dpnoise is not in shared_preload_libraries: every release will fail with ZB002 until it is'
            USING HINT = 'Add dpnoise to shared_preload_libraries in postgresql.conf and restart the server.';
    END IF;
END $$;
