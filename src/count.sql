-- dp_count: noisy counts (src/count.rs).
-- Support functions are deterministic (IMMUTABLE) except the final
-- functions, which draw noise (VOLATILE). EXECUTE on every support function
-- is revoked from PUBLIC at the end of the script (src/finalize.sql).

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

-- (epsilon, delta) and automatic choice.
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
