-- dpnoise 0.3.0 -> 0.4.0: private partition selection (dp_partition_selected),
-- which the analyst gate adds to analysts' GROUP BY over protected rows.
CREATE FUNCTION dp_count_step(bigint, double precision, double precision) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_count_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_partition_selected_final(bigint) RETURNS boolean
    AS 'MODULE_PATHNAME', 'dp_partition_selected_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE AGGREGATE dp_partition_selected(epsilon double precision, delta double precision) (
    SFUNC = dp_count_step, STYPE = bigint, INITCOND = '0',
    COMBINEFUNC = int8pl, FINALFUNC = dp_partition_selected_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_partition_selected(double precision, double precision) IS
    'Whether this group may be shown, at (epsilon, delta): true with the optimal probability for its number of rows (one per person). Use in HAVING when group keys come from private data.';

-- As src/finalize.sql does for a fresh install: support functions revoked
-- from PUBLIC and named, the aggregate VOLATILE.
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
