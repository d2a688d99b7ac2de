-- dpnoise 0.14.0 → 0.15.0: dp_avg centres its values (no SQL change: the
-- same aggregate, a new final computation); new aggregates dp_var,
-- dp_stddev, dp_quantile, dp_median, dp_min, dp_max; dp_aggregate_accuracy.
COMMENT ON AGGREGATE dp_avg(double precision, double precision, double precision, double precision) IS
    'Noisy average of values clamped to [lower, upper]: centred staircase sum and geometric count, epsilon split to minimise the worst-case error (dp_aggregate_accuracy).';

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

-- The error of dp_avg, dp_var and the quantiles (src/moments.rs).
CREATE  FUNCTION "dp_aggregate_accuracy"(
	"aggregate" TEXT, /* Option < & str > */
	"epsilon" double precision, /* Option < f64 > */
	"lower" double precision, /* Option < f64 > */
	"upper" double precision, /* Option < f64 > */
	"persons" bigint, /* Option < i64 > */
	"p" double precision DEFAULT 0.5, /* Option < f64 > */
	"confidence" double precision DEFAULT 0.95 /* Option < f64 > */
) RETURNS TABLE (
	"units" TEXT,  /* String */
	"epsilon_split" TEXT,  /* String */
	"mean_abs_error" double precision,  /* f64 */
	"std_dev" double precision,  /* f64 */
	"ci_half_width" double precision  /* f64 */
)
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'dp_aggregate_accuracy_wrapper';
COMMENT ON FUNCTION dp_aggregate_accuracy(text, double precision, double precision, double precision, bigint, double precision, double precision) IS
    'The epsilon split and the error of dp_avg, dp_var (value units, worst case, for a group of persons) and the quantiles (ranks), before spending anything.';

-- As src/finalize.sql: the new support functions are revoked from PUBLIC and
-- named after their aggregates; the new aggregates are VOLATILE.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT DISTINCT s.fn::regprocedure
        FROM pg_catalog.pg_aggregate a,
             LATERAL (VALUES (a.aggtransfn), (a.aggfinalfn), (a.aggcombinefn), (a.aggserialfn), (a.aggdeserialfn)) s(fn)
        JOIN pg_catalog.pg_depend d ON d.objid = s.fn AND d.classid = 'pg_catalog.pg_proc'::regclass AND d.deptype = 'e'
        JOIN pg_catalog.pg_extension x ON x.oid = d.refobjid AND x.extname = 'dpnoise'
    LOOP
        EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
    UPDATE pg_catalog.pg_proc p SET provolatile = 'v'
    FROM pg_catalog.pg_aggregate a
    JOIN pg_catalog.pg_proc final ON final.oid = a.aggfinalfn
    JOIN pg_catalog.pg_depend d ON d.objid = a.aggfnoid AND d.classid = 'pg_catalog.pg_proc'::regclass AND d.deptype = 'e'
    JOIN pg_catalog.pg_extension x ON x.oid = d.refobjid AND x.extname = 'dpnoise'
    WHERE p.oid = a.aggfnoid AND final.provolatile = 'v';
END $$;

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

-- Per-person bounding in one pass (issue 38): the functions the analyst
-- gate writes into a query over a table with several rows per person.
CREATE FUNCTION dp_bound_key(seed bigint, VARIADIC parts "any") RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_bound_key' LANGUAGE C IMMUTABLE LEAKPROOF PARALLEL SAFE;
COMMENT ON FUNCTION dp_bound_key(bigint, "any") IS
    'The key that orders a person''s groups for contribution bounding: SipHash under the seed of each part''s hash (written by the analyst gate).';
CREATE FUNCTION dp_bound_kept(key bigint, k integer) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_bound_kept' LANGUAGE C WINDOW IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION dp_bound_kept(bigint, integer) IS
    'Window function over a person''s rows ordered by dp_bound_key: 1 on the first row of each of the first k groups, else NULL.';
CREATE FUNCTION dp_bound_present(key bigint, k integer, value "any") RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_bound_present' LANGUAGE C WINDOW IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION dp_bound_present(bigint, integer, "any") IS
    'As dp_bound_kept, 1 only if the person has a non-NULL value in the group.';
CREATE FUNCTION dp_bound_sum(key bigint, k integer, value double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_bound_sum_float8' LANGUAGE C WINDOW IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION dp_bound_sum(bigint, integer, double precision) IS
    'As dp_bound_kept, the person''s exact sum of the group''s non-NULL values (NULL if none).';
CREATE FUNCTION dp_bound_sum(key bigint, k integer, value bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_bound_sum_int8' LANGUAGE C WINDOW IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION dp_bound_sum(bigint, integer, bigint) IS
    'As dp_bound_kept, the person''s sum of the group''s non-NULL values, saturated to bigint (NULL if none).';
CREATE FUNCTION dp_bound_avg(key bigint, k integer, value double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_bound_avg_float8' LANGUAGE C WINDOW IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION dp_bound_avg(bigint, integer, double precision) IS
    'As dp_bound_kept, the person''s average of the group''s non-NULL values (NULL if none).';
