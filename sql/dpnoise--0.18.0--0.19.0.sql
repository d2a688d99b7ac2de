-- dpnoise 0.18.0 → 0.19.0: quantiles and variances over several rows per person (src/per_person.rs).
-- The gate's bounding reads one value of each person per group: their own quantile, or one row.
CREATE FUNCTION dp_bound_quantile(key bigint, k integer, value double precision, p double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_bound_quantile' LANGUAGE C WINDOW IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION dp_bound_quantile(bigint, integer, double precision, double precision) IS
    'As dp_bound_kept, the person''s own p-quantile (nearest rank) of the group''s non-NULL values (NULL if none).';
CREATE FUNCTION dp_bound_row(key bigint, k integer, value double precision) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_bound_row' LANGUAGE C WINDOW IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION dp_bound_row(bigint, integer, double precision) IS
    'As dp_bound_kept, one of the person''s non-NULL values in the group, at a rank drawn from the key (NULL if none).';

-- A bounded level without GROUP BY keys combines each person's rows by the person (src/person_sum.rs).
CREATE FUNCTION dp_person_sum_step(internal, double precision) RETURNS internal
    AS 'MODULE_PATHNAME', 'dp_person_sum_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_person_sum_final(internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_person_sum_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_person_avg_final(internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'dp_person_avg_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE AGGREGATE dp_person_sum(value double precision) (
    SFUNC = dp_person_sum_step, STYPE = internal, SSPACE = 40,
    FINALFUNC = dp_person_sum_final, PARALLEL = SAFE
);
CREATE AGGREGATE dp_person_avg(value double precision) (
    SFUNC = dp_person_sum_step, STYPE = internal, SSPACE = 40,
    FINALFUNC = dp_person_avg_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_person_sum(double precision) IS
    'The exact sum of the non-NULL values, rounded once (the same in any order of the rows); written by the analyst gate to combine a person''s rows. Not a release.';
COMMENT ON AGGREGATE dp_person_avg(double precision) IS
    'The exact sum of the non-NULL values, rounded once, over their count; written by the analyst gate to combine a person''s rows. Not a release.';

-- Total forms (src/total/dates.rs): date ± integer, which the gate writes in place of the built-ins
-- (they raise "date out of range" near the ends of the calendar).
CREATE FUNCTION dp_total_date_pli(date, integer) RETURNS date
    AS 'MODULE_PATHNAME', 'dp_total_date_pli' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_integer_pl_date(integer, date) RETURNS date
    AS 'MODULE_PATHNAME', 'dp_total_integer_pl_date' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION dp_total_date_mii(date, integer) RETURNS date
    AS 'MODULE_PATHNAME', 'dp_total_date_mii' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION dp_total_date_pli(date, integer) IS
    'Total form of date_pli(date,integer): NULL where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_integer_pl_date(integer, date) IS
    'Total form of integer_pl_date(integer,date): NULL where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';
COMMENT ON FUNCTION dp_total_date_mii(date, integer) IS
    'Total form of date_mii(date,integer): NULL where it raises an error; the analyst gate writes it in place of the built-in (docs/analysts.md).';

-- finalize.sql's blocks, as a fresh install runs them: revocations, volatility, support comments.
-- Every support function of our aggregates (the extension's own: int8pl is
-- PostgreSQL's) loses EXECUTE for PUBLIC: a role that could build its own
-- aggregate from them (say, the sum transition with the serialize function
-- as final) would read exact answers. And CREATE AGGREGATE records every
-- aggregate as IMMUTABLE: one whose final function draws noise is marked
-- VOLATILE, so the planner never treats two calls as one.
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
