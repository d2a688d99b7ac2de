-- dpnoise 0.19.0 → 0.20.0: row counts written dp_sum(1.0, ...) select their groups by their own noise (src/selection.rs).
CREATE FUNCTION dp_count_step(bigint, double precision, double precision, double precision, text, text, double precision) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_count_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_sum_selected_final(bigint) RETURNS boolean
    AS 'MODULE_PATHNAME', 'dp_sum_selected_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE AGGREGATE dp_sum_selected(epsilon double precision, lower double precision, upper double precision, mechanism text, loss text, delta double precision) (
    SFUNC = dp_count_step, STYPE = bigint, INITCOND = '0',
    COMBINEFUNC = int8pl, FINALFUNC = dp_sum_selected_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_sum_selected(double precision, double precision, double precision, text, text, double precision) IS
    'Whether this group may be shown: true when the dp_sum(value, epsilon, lower, upper) of that mechanism and loss released beside it in the same level reached the threshold set from epsilon, the bounds, delta and the groups a person may add to. The analyst gate writes it in HAVING; it pays delta only.';
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


-- dp_query_accuracy takes 'rows', the row count dp_sum(1.0, epsilon, lower, upper).
COMMENT ON FUNCTION dp_query_accuracy(text, double precision, text[], double precision, double precision, boolean, double precision, double precision, text) IS
    'The error of one aggregate (count, sum with its bounds, or rows: the row count dp_sum(1.0, epsilon, lower, upper)) in a query over these tables, with the contribution bounds the gate applies this session, and the persons a group needs for partition selection to show it; with delta > 0, of the (epsilon, delta) release (a Gaussian over a person''s k groups is calibrated to the L2 sensitivity across them). Spends and draws nothing.';
