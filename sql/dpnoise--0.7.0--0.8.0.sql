-- dpnoise 0.7.0 -> 0.8.0: analysts over distributed protected tables. The
-- partials of an admitted query run sealed, as the extension's owner; private
-- partition selection merges like dp_count.
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

CREATE FUNCTION dp_merge_selected_step(bigint, bigint, double precision, double precision) RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_merge_count_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION dp_merge_selected_final(bigint) RETURNS boolean
    AS 'MODULE_PATHNAME', 'dp_merge_selected_final' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE AGGREGATE dp_merge_selected(partial bigint, epsilon double precision, delta double precision) (
    SFUNC = dp_merge_selected_step, STYPE = bigint, INITCOND = '0', FINALFUNC = dp_merge_selected_final, PARALLEL = SAFE
);
COMMENT ON AGGREGATE dp_merge_selected(bigint, double precision, double precision) IS
    'dp_partition_selected over exact partial counts (a Citus table''s shards): drawn once, here.';

-- Runs last: what holds for every aggregate of the extension, derived from
-- the catalog rather than listed by hand.

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
