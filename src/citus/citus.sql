-- dpnoise on Citus (src/citus/): a dpnoise aggregate over a Citus table
-- is split by the planner hook into exact partials, which Citus pushes down
-- to the workers as its own count and sum, and a merge on the node that
-- planned the statement (the coordinator), which draws the noise once and
-- is charged there.

-- A value clamped to [lower, upper] and rounded onto the lattice 2^k, in
-- lattice steps: what a worker sums for dp_sum, dp_sum_laplace,
-- dp_sum_staircase and dp_avg (the same rounding as their transitions,
-- so the distributed sum is bit-identical to the serial one).
CREATE FUNCTION dp_lattice_steps(value double precision, k integer, lower double precision, upper double precision)
    RETURNS bigint AS 'MODULE_PATHNAME', 'dp_lattice_steps' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION dp_lattice_steps(value bigint, k integer, lower bigint, upper bigint)
    RETURNS bigint AS 'MODULE_PATHNAME', 'dp_lattice_steps_int' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION dp_lattice_steps(double precision, integer, double precision, double precision) IS
    'The value clamped to [lower, upper] in steps of 2^k, rounded half up: a distributed dpnoise sum adds these.';
COMMENT ON FUNCTION dp_lattice_steps(bigint, integer, bigint, bigint) IS
    'The value clamped to [lower, upper] in steps of 2^k, rounded half up: a distributed dpnoise sum adds these.';

-- The partials, read on the coordinator: runs the query Citus distributes
-- and returns its rows (group keys, then exact counts and step sums).
CREATE FUNCTION dp_partials(query text) RETURNS SETOF record
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS $$
BEGIN
    RETURN QUERY EXECUTE query;
END
$$;
COMMENT ON FUNCTION dp_partials(text) IS
    'The exact partials of a dpnoise aggregate over a Citus table, as the planner hook wrote them; runs with the caller''s privileges.';

-- The partials of an analyst's query over a distributed protected table:
-- run as the extension's owner (the workers check SELECT on the shards,
-- which the analyst does not hold), and only the text the planner hook
-- wrote, sealed with this backend's key (src/seal.rs). The search_path is
-- the one the text was written for.
CREATE FUNCTION dp_check_seal(query text, seal bytea) RETURNS void
    AS 'MODULE_PATHNAME', 'dp_check_seal' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION dp_check_seal(text, bytea) IS
    'Raises 42501 unless the seal is this session''s for the query (dp_partials_sealed).';
CREATE FUNCTION dp_partials_sealed(query text, seal bytea) RETURNS SETOF record
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp SET dpnoise.analyst = off AS $$
BEGIN
    PERFORM @extschema@.dp_check_seal(query, seal);
    RETURN QUERY EXECUTE query;
END
$$;
COMMENT ON FUNCTION dp_partials_sealed(text, bytea) IS
    'The exact partials of an analyst''s admitted query over a distributed protected table, as the planner hook wrote and sealed them; runs as the extension''s owner.';

-- The merges: the original call's parameters, normalised.
CREATE FUNCTION dp_merge_count_step(bigint, bigint, double precision, double precision, text) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_merge_count_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_merge_count_final(bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_merge_count_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE AGGREGATE dp_merge_count(partial bigint, epsilon double precision, delta double precision, mechanism text) (
    SFUNC = dp_merge_count_step, STYPE = bigint, INITCOND = '0', FINALFUNC = dp_merge_count_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_merge_count(bigint, double precision, double precision, text) IS
    'dp_count over exact partial counts (a Citus table''s shards): noise drawn once, here.';

CREATE FUNCTION dp_merge_sum_step(internal, numeric, bigint, integer, integer, double precision,
                                  double precision, double precision, double precision, text, text)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_merge_sum_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_merge_sum_final(internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_merge_sum_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE AGGREGATE dp_merge_sum(steps numeric, n bigint, kind integer, k integer, epsilon double precision,
                              lower double precision, upper double precision, delta double precision,
                              mechanism text, loss text) (
    SFUNC = dp_merge_sum_step, STYPE = internal, SSPACE = 56, FINALFUNC = dp_merge_sum_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_merge_sum(numeric, bigint, integer, integer, double precision, double precision,
                                  double precision, double precision, text, text) IS
    'dp_sum, dp_sum_laplace, dp_sum_staircase or dp_avg (kind 0-3) over exact partial lattice sums: noise drawn once, here.';

CREATE FUNCTION dp_merge_sum_int_step(internal, numeric, bigint, integer, integer, double precision,
                                      bigint, bigint, double precision, text, text)
    RETURNS internal AS 'MODULE_PATHNAME', 'dp_merge_sum_int_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_merge_sum_int_final(internal) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_merge_sum_int_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE AGGREGATE dp_merge_sum(steps numeric, n bigint, kind integer, k integer, epsilon double precision,
                              lower bigint, upper bigint, delta double precision, mechanism text, loss text) (
    SFUNC = dp_merge_sum_int_step, STYPE = internal, SSPACE = 56, FINALFUNC = dp_merge_sum_int_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_merge_sum(numeric, bigint, integer, integer, double precision, bigint, bigint,
                                  double precision, text, text) IS
    'dp_sum, dp_sum_laplace or dp_sum_staircase of bigint (kind 0-2) over exact partial sums: noise drawn once, here.';

CREATE FUNCTION dp_merge_selected_step(bigint, bigint, double precision, double precision) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_merge_count_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_merge_selected_final(bigint) RETURNS boolean
    AS 'MODULE_PATHNAME', 'dp_merge_selected_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE AGGREGATE dp_merge_selected(partial bigint, epsilon double precision, delta double precision) (
    SFUNC = dp_merge_selected_step, STYPE = bigint, INITCOND = '0', FINALFUNC = dp_merge_selected_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_merge_selected(bigint, double precision, double precision) IS
    'dp_partition_selected over exact partial counts (a Citus table''s shards): drawn once, here.';
