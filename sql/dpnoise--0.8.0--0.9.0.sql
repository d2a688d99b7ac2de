-- dpnoise 0.8.0 -> 0.9.0: session budgets. dp_session_budget lowers a
-- session's own cap; dp_sessions shows live sessions from shared memory;
-- each ledger row records its session (pid and backend start).
--
-- The ledger worker of 0.9.0 calls charge_batch with the session's start:
-- until this update runs, a server with the new library refuses releases
-- (ZB002), and one still running the old library does until it restarts.
ALTER TABLE dpnoise.ledger ADD COLUMN session_start timestamptz;
DROP FUNCTION dpnoise.charge_batch(oid[], numeric[], numeric[], bigint[], text[], text[], integer[]);
CREATE FUNCTION dpnoise.charge_batch(
    requesters oid[], epsilons numeric[], deltas numeric[], releases bigint[],
    mechanisms text[], statements text[], pids integer[], starts timestamptz[])
RETURNS TABLE (granted boolean, is_strict boolean, remaining_epsilon numeric, remaining_delta numeric)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    -- Per distinct role of the batch (usually one): what it has left, its
    -- model, and what this batch charges it.
    roles oid[] := '{}';
    left_epsilon numeric[] := '{}';
    left_delta numeric[] := '{}';
    strict_of boolean[] := '{}';
    charged_epsilon numeric[] := '{}';
    charged_delta numeric[] := '{}';
    capped boolean := false;
    cap_epsilon numeric;
    cap_delta numeric;
    g boolean[] := '{}';
    st boolean[] := '{}';
    re numeric[] := '{}';
    rd numeric[] := '{}';
    cost_epsilon numeric;
    cost_delta numeric;
    one_epsilon numeric;
    one_delta numeric;
    one_strict boolean;
    one_cap_epsilon numeric;
    one_cap_delta numeric;
    j integer;
BEGIN
    LOCK TABLE dpnoise.charge_lock IN EXCLUSIVE MODE;
    -- One index lookup per role: each statement here runs for every batch,
    -- so each is kept to a plan that starts cheaply.
    FOR i IN 1 .. cardinality(requesters) LOOP
        CONTINUE WHEN requesters[i] = ANY (roles);
        -- The global cap, if any, comes along (a batch without a role with
        -- a budget grants nothing, so never needs it).
        SELECT b.epsilon - p.epsilon, b.delta - p.delta, b.strict, c.epsilon, c.delta
        INTO one_epsilon, one_delta, one_strict, one_cap_epsilon, one_cap_delta
        FROM dpnoise.budget b JOIN dpnoise.spent p ON p.role = b.role
        LEFT JOIN dpnoise.global_cap c ON true WHERE b.role = requesters[i];
        IF one_cap_epsilon IS NOT NULL THEN
            capped := true;
            cap_epsilon := one_cap_epsilon;
            cap_delta := one_cap_delta;
        END IF;
        roles := roles || requesters[i];
        left_epsilon := left_epsilon || one_epsilon;
        left_delta := left_delta || one_delta;
        strict_of := strict_of || coalesce(one_strict, false);
        charged_epsilon := charged_epsilon || 0::numeric;
        charged_delta := charged_delta || 0::numeric;
    END LOOP;
    IF capped THEN
        SELECT cap_epsilon - coalesce(sum(s.epsilon), 0), cap_delta - coalesce(sum(s.delta), 0)
        INTO cap_epsilon, cap_delta FROM dpnoise.spent s;
    END IF;
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
            charged_epsilon[j] := charged_epsilon[j] + cost_epsilon;
            charged_delta[j] := charged_delta[j] + cost_delta;
            cap_epsilon := cap_epsilon - cost_epsilon;
            cap_delta := cap_delta - cost_delta;
        END IF;
        re[i] := CASE WHEN capped THEN least(left_epsilon[j], cap_epsilon) ELSE left_epsilon[j] END;
        rd[i] := CASE WHEN capped THEN least(left_delta[j], cap_delta) ELSE left_delta[j] END;
    END LOOP;
    -- One statement writes what was spent and the ledger rows (in request
    -- order: unnest's ordinality) and answers.
    RETURN QUERY
    WITH spend AS (
        UPDATE dpnoise.spent p SET epsilon = p.epsilon + c.e, delta = p.delta + c.d
        FROM unnest(roles, charged_epsilon, charged_delta) AS c(r, e, d)
        WHERE p.role = c.r AND (c.e <> 0 OR c.d <> 0)
    ), charges AS (
        INSERT INTO dpnoise.ledger (role, charged_at, statement, mechanism, epsilon, delta, releases, pid, session_start)
        SELECT u.r, clock_timestamp(), u.s, u.m, u.e, u.d, u.n, u.p, u.t
        FROM unnest(requesters, statements, mechanisms, epsilons, deltas, releases, pids, starts, g) WITH ORDINALITY
             AS u(r, s, m, e, d, n, p, t, ok, k)
        WHERE u.ok ORDER BY u.k
    )
    SELECT u.ok, u.strict, u.e, u.d FROM unnest(g, st, re, rd) WITH ORDINALITY AS u(ok, strict, e, d, k) ORDER BY u.k;
END $$;
REVOKE EXECUTE ON FUNCTION dpnoise.charge_batch(oid[], numeric[], numeric[], bigint[], text[], text[], integer[], timestamptz[]) FROM PUBLIC;
COMMENT ON FUNCTION dpnoise.charge_batch(oid[], numeric[], numeric[], bigint[], text[], text[], integer[], timestamptz[]) IS
    'Charges a batch of releases; called by the ledger worker only.';

CREATE OR REPLACE VIEW dp_my_ledger WITH (security_barrier) AS
SELECT l.id, l.charged_at, l.statement, l.mechanism, l.epsilon, l.delta, l.releases, l.pid, l.session_start
FROM dpnoise.ledger l
WHERE l.role = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user)::regrole;

CREATE FUNCTION dp_session_budget(epsilon double precision DEFAULT NULL, delta double precision DEFAULT NULL)
    RETURNS void VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'dp_session_budget_wrapper';

-- Live sessions and what each has spent (src/budget/session.rs): read from
-- shared memory, so it costs no writes. dpnoise.sessions() shows a role
-- only the sessions charged to roles whose privileges it has (a superuser:
-- all); the join with pg_stat_activity drops exited backends (pid and
-- start time both match only the live one).
CREATE FUNCTION dpnoise.sessions(
    OUT pid integer, OUT role oid, OUT backend_start timestamptz, OUT epsilon_spent numeric,
    OUT delta_spent numeric, OUT epsilon_cap numeric, OUT delta_cap numeric)
    RETURNS SETOF record AS 'MODULE_PATHNAME', 'dp_session_entries_wrapper' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
CREATE VIEW dp_sessions WITH (security_barrier) AS
SELECT s.pid, s.role::regrole AS role, a.usename AS login, a.application_name, s.backend_start,
       s.epsilon_spent, s.delta_spent, s.epsilon_cap, s.delta_cap,
       b.epsilon_remaining AS role_epsilon_remaining, b.delta_remaining AS role_delta_remaining
FROM dpnoise.sessions() s
JOIN pg_catalog.pg_stat_activity a ON a.pid = s.pid AND a.backend_start = s.backend_start
LEFT JOIN @extschema@.dp_budgets b ON b.role = s.role::regrole;
GRANT SELECT ON dp_sessions TO PUBLIC;
COMMENT ON VIEW dp_sessions IS
    'Live sessions of this database: spent epsilon and delta, the session caps, and what remains of the role''s budget. A role sees the sessions of roles it has the privileges of; a superuser, all.';
COMMENT ON FUNCTION dpnoise.sessions() IS 'The session entries in shared memory that the caller may see (dp_sessions reads it).';
COMMENT ON FUNCTION dp_session_budget(double precision, double precision) IS
    'Lowers this session''s cap on epsilon and delta (NULL: unchanged); never raises it.';

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
