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

-- Total forms of built-ins for analysts (issue 36):
--
-- The analyst gate replaces built-ins that can raise an error on some value
-- (integer overflow, a zero divisor, a date at the end of the calendar) by
-- these total forms in an analyst's statement over protected tables
-- (src/gate/substitute.rs, docs/analysts.md).


CREATE FUNCTION dp_total_int4pl(integer, integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4pl' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int4mi(integer, integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4mi' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int4mul(integer, integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4mul' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int4div(integer, integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4div' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int4mod(integer, integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4mod' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int8pl(bigint, bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_total_int8pl' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int8mi(bigint, bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_total_int8mi' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int8mul(bigint, bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_total_int8mul' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int8div(bigint, bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_total_int8div' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int8mod(bigint, bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_total_int8mod' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int4um(integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4um' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int4abs(integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4abs' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int8um(bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_total_int8um' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int8abs(bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_total_int8abs' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int4_int8(bigint) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4_int8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int4_float8(double precision) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int8_float8(double precision) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_total_int8_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int4_float4(real) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4_float4' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int8_float4(real) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_total_int8_float4' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_float4_float8(double precision) RETURNS real
    AS 'MODULE_PATHNAME', 'dp_total_float4_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_float8pl(double precision, double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_total_float8pl' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_float8mi(double precision, double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_total_float8mi' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_float8mul(double precision, double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_total_float8mul' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_float8div(double precision, double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_total_float8div' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_float4pl(real, real) RETURNS real
    AS 'MODULE_PATHNAME', 'dp_total_float4pl' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_float4mi(real, real) RETURNS real
    AS 'MODULE_PATHNAME', 'dp_total_float4mi' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_float4mul(real, real) RETURNS real
    AS 'MODULE_PATHNAME', 'dp_total_float4mul' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_float4div(real, real) RETURNS real
    AS 'MODULE_PATHNAME', 'dp_total_float4div' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_numeric_add(numeric, numeric) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_numeric_add' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_numeric_sub(numeric, numeric) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_numeric_sub' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_numeric_mul(numeric, numeric) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_numeric_mul' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_numeric_div(numeric, numeric) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_numeric_div' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_numeric_mod(numeric, numeric) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_numeric_mod' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int4_numeric(numeric) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_int4_numeric' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_int8_numeric(numeric) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_total_int8_numeric' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_float8_numeric(numeric) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_total_float8_numeric' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_numeric_round(numeric, integer) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_numeric_round' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_numeric_round0(numeric) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_numeric_round0' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_numeric_floor(numeric) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_numeric_floor' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_numeric_ceil(numeric) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_numeric_ceil' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_width_bucket_float8(double precision, double precision, double precision, integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_width_bucket_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_width_bucket_numeric(numeric, numeric, numeric, integer) RETURNS integer
    AS 'MODULE_PATHNAME', 'dp_total_width_bucket_numeric' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_lower(text) RETURNS text
    AS 'MODULE_PATHNAME', 'dp_total_lower' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_upper(text) RETURNS text
    AS 'MODULE_PATHNAME', 'dp_total_upper' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_textlike(text, text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'dp_total_textlike' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_textnlike(text, text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'dp_total_textnlike' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_texticlike(text, text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'dp_total_texticlike' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_texticnlike(text, text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'dp_total_texticnlike' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_text_substr(text, integer, integer) RETURNS text
    AS 'MODULE_PATHNAME', 'dp_total_text_substr' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_timestamp_trunc(text, timestamp without time zone) RETURNS timestamp without time zone
    AS 'MODULE_PATHNAME', 'dp_total_timestamp_trunc' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_timestamptz_trunc(text, timestamp with time zone) RETURNS timestamp with time zone
    AS 'MODULE_PATHNAME', 'dp_total_timestamptz_trunc' LANGUAGE C STABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_timestamp_part(text, timestamp without time zone) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_total_timestamp_part' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_timestamptz_part(text, timestamp with time zone) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_total_timestamptz_part' LANGUAGE C STABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_extract_timestamp(text, timestamp without time zone) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_extract_timestamp' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_extract_timestamptz(text, timestamp with time zone) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_extract_timestamptz' LANGUAGE C STABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_extract_date(text, date) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_extract_date' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_date_part_date(text, date) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_total_date_part_date' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_date_timestamp(date) RETURNS timestamp without time zone
    AS 'MODULE_PATHNAME', 'dp_total_date_timestamp' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_date_timestamptz(date) RETURNS timestamp with time zone
    AS 'MODULE_PATHNAME', 'dp_total_date_timestamptz' LANGUAGE C STABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_make_date(integer, integer, integer) RETURNS date
    AS 'MODULE_PATHNAME', 'dp_total_make_date' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION dp_total_int4pl(integer, integer) IS
    'Total form of int4pl(integer,integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int4mi(integer, integer) IS
    'Total form of int4mi(integer,integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int4mul(integer, integer) IS
    'Total form of int4mul(integer,integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int4div(integer, integer) IS
    'Total form of int4div(integer,integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int4mod(integer, integer) IS
    'Total form of int4mod(integer,integer), mod(integer,integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int8pl(bigint, bigint) IS
    'Total form of int48pl(integer,bigint), int84pl(bigint,integer), int8pl(bigint,bigint): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int8mi(bigint, bigint) IS
    'Total form of int48mi(integer,bigint), int84mi(bigint,integer), int8mi(bigint,bigint): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int8mul(bigint, bigint) IS
    'Total form of int48mul(integer,bigint), int84mul(bigint,integer), int8mul(bigint,bigint): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int8div(bigint, bigint) IS
    'Total form of int48div(integer,bigint), int84div(bigint,integer), int8div(bigint,bigint): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int8mod(bigint, bigint) IS
    'Total form of int8mod(bigint,bigint), mod(bigint,bigint): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int4um(integer) IS
    'Total form of int4um(integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int4abs(integer) IS
    'Total form of abs(integer), int4abs(integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int8um(bigint) IS
    'Total form of int8um(bigint): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int8abs(bigint) IS
    'Total form of abs(bigint), int8abs(bigint): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int4_int8(bigint) IS
    'Total form of int4(bigint): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int4_float8(double precision) IS
    'Total form of int4(double precision): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int8_float8(double precision) IS
    'Total form of int8(double precision): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int4_float4(real) IS
    'Total form of int4(real): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int8_float4(real) IS
    'Total form of int8(real): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_float4_float8(double precision) IS
    'Total form of float4(double precision): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_float8pl(double precision, double precision) IS
    'Total form of float8pl(double precision,double precision): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_float8mi(double precision, double precision) IS
    'Total form of float8mi(double precision,double precision): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_float8mul(double precision, double precision) IS
    'Total form of float8mul(double precision,double precision): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_float8div(double precision, double precision) IS
    'Total form of float8div(double precision,double precision): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_float4pl(real, real) IS
    'Total form of float4pl(real,real): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_float4mi(real, real) IS
    'Total form of float4mi(real,real): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_float4mul(real, real) IS
    'Total form of float4mul(real,real): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_float4div(real, real) IS
    'Total form of float4div(real,real): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_numeric_add(numeric, numeric) IS
    'Total form of numeric_add(numeric,numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_numeric_sub(numeric, numeric) IS
    'Total form of numeric_sub(numeric,numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_numeric_mul(numeric, numeric) IS
    'Total form of numeric_mul(numeric,numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_numeric_div(numeric, numeric) IS
    'Total form of numeric_div(numeric,numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_numeric_mod(numeric, numeric) IS
    'Total form of mod(numeric,numeric), numeric_mod(numeric,numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int4_numeric(numeric) IS
    'Total form of int4(numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_int8_numeric(numeric) IS
    'Total form of int8(numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_float8_numeric(numeric) IS
    'Total form of float8(numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_numeric_round(numeric, integer) IS
    'Total form of round(numeric,integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_numeric_round0(numeric) IS
    'Total form of round(numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_numeric_floor(numeric) IS
    'Total form of floor(numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_numeric_ceil(numeric) IS
    'Total form of ceil(numeric), ceiling(numeric): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_width_bucket_float8(double precision, double precision, double precision, integer) IS
    'Total form of width_bucket(double precision,double precision,double precision,integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_width_bucket_numeric(numeric, numeric, numeric, integer) IS
    'Total form of width_bucket(numeric,numeric,numeric,integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_lower(text) IS
    'Total form of lower(text): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_upper(text) IS
    'Total form of upper(text): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_textlike(text, text) IS
    'Total form of "like"(text,text), textlike(text,text): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_textnlike(text, text) IS
    'Total form of notlike(text,text), textnlike(text,text): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_texticlike(text, text) IS
    'Total form of texticlike(text,text): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_texticnlike(text, text) IS
    'Total form of texticnlike(text,text): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_text_substr(text, integer, integer) IS
    'Total form of "substring"(text,integer,integer), substr(text,integer,integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_timestamp_trunc(text, timestamp without time zone) IS
    'Total form of date_trunc(text,timestamp without time zone): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_timestamptz_trunc(text, timestamp with time zone) IS
    'Total form of date_trunc(text,timestamp with time zone): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_timestamp_part(text, timestamp without time zone) IS
    'Total form of date_part(text,timestamp without time zone): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_timestamptz_part(text, timestamp with time zone) IS
    'Total form of date_part(text,timestamp with time zone): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_extract_timestamp(text, timestamp without time zone) IS
    'Total form of "extract"(text,timestamp without time zone): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_extract_timestamptz(text, timestamp with time zone) IS
    'Total form of "extract"(text,timestamp with time zone): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_extract_date(text, date) IS
    'Total form of "extract"(text,date): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_date_part_date(text, date) IS
    'Total form of date_part(text,date): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_date_timestamp(date) IS
    'Total form of "timestamp"(date): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_date_timestamptz(date) IS
    'Total form of timestamptz(date): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_make_date(integer, integer, integer) IS
    'Total form of make_date(integer,integer,integer): NULL (or +-Infinity) where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';

-- dp_query_accuracy takes δ and a mechanism (issue 39): the error of an
-- (ε, δ) release, whose Gaussian over a person's k groups is calibrated to
-- the L2 sensitivity across them.
DROP FUNCTION dp_query_accuracy(text, double precision, text[], double precision, double precision, boolean, double precision);
CREATE FUNCTION dp_query_accuracy(
    aggregate text, epsilon double precision, tables text[],
    lower double precision DEFAULT NULL, upper double precision DEFAULT NULL,
    grouped boolean DEFAULT true, confidence double precision DEFAULT 0.95,
    delta double precision DEFAULT 0.0, mechanism text DEFAULT NULL)
RETURNS TABLE (max_groups_contributed integer, epsilon_per_group double precision, mechanism text,
               mean_abs_error double precision, std_dev double precision, ci_half_width double precision,
               selection_even_odds bigint, selection_always_kept bigint)
STABLE PARALLEL RESTRICTED LANGUAGE c AS 'MODULE_PATHNAME', 'dp_query_accuracy_wrapper';
COMMENT ON FUNCTION dp_query_accuracy(text, double precision, text[], double precision, double precision, boolean, double precision, double precision, text) IS
    'The error of one aggregate (count, or sum with its bounds) in a query over these tables, with the contribution bounds the gate applies this session, and the persons a group needs for partition selection to show it; with delta > 0, of the (epsilon, delta) release (a Gaussian over a person''s k groups is calibrated to the L2 sensitivity across them). Spends and draws nothing.';

-- to_char of timestamps: total forms (issue 36).
CREATE FUNCTION dp_total_timestamp_to_char(timestamp without time zone, text) RETURNS text
    AS 'MODULE_PATHNAME', 'dp_total_timestamp_to_char' LANGUAGE C STABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_timestamptz_to_char(timestamp with time zone, text) RETURNS text
    AS 'MODULE_PATHNAME', 'dp_total_timestamptz_to_char' LANGUAGE C STABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION dp_total_timestamp_to_char(timestamp without time zone, text) IS
    'Total form of to_char(timestamp without time zone,text): NULL for a format over 1 KB or with a TM (localized) field; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_timestamptz_to_char(timestamp with time zone, text) IS
    'Total form of to_char(timestamp with time zone,text): NULL for a format over 1 KB or with a TM (localized) field; the analyst gate writes it in place of the built-in (docs/analysts.md).';

-- Per-person numeric aggregates read their argument capped (an attack overflowed a per-person sum).
CREATE FUNCTION dp_total_numeric_capped(numeric) RETURNS numeric
    AS 'MODULE_PATHNAME', 'dp_total_numeric_capped' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION dp_total_numeric_capped(numeric) IS
    'The value, or NULL where it spans more than about 64 digits: the analyst gate reads the arguments of per-person sum, avg, min and max of numeric through it (docs/analysts.md).';

-- Protected text read by functions is capped (an attack amplified run time with long text).
CREATE FUNCTION dp_total_capped(anyelement) RETURNS anyelement
    AS 'MODULE_PATHNAME', 'dp_total_capped' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION dp_total_capped(anyelement) IS
    'A variable-length value as it is, or NULL over 1 KB: the analyst gate passes protected text columns through it where a function reads them (docs/analysts.md).';
