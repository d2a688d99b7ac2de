-- dpnoise 0.13.0 -> 0.14.0: one way to charge.
--
-- Every statement now pays for all its releases from its plan, before it
-- runs, for every role (src/charge.rs): what it is charged no longer
-- depends on its data. The strict model, whose charge did (one release
-- per group found), is retired: dp_budget_set_strict and the budget's
-- strict column go. A role that was strict is charged as every role is,
-- once per call site and grouping set; a person who may appear in several
-- groups is bounded properly by contribution bounding (dp_protect and the
-- analyst gate), at a cost fixed before execution. The ledger keeps every
-- charge made under the old model.

DO $$
DECLARE
    strict_roles text;
BEGIN
    SELECT pg_catalog.string_agg(b.role::text, ', ' ORDER BY b.role::text) INTO strict_roles
    FROM dpnoise.budget b WHERE b.strict;
    IF strict_roles IS NOT NULL THEN
        RAISE NOTICE 'dpnoise 0.14.0 retires strict budgets: % now pay once per call site and grouping set, like every role', strict_roles
            USING HINT = 'Bound what one person contributes with dp_protect and the analyst gate (README, upgrade notes).';
    END IF;
END $$;

DROP FUNCTION dp_budget_set_strict(regrole, boolean);
DROP VIEW dp_sessions;
DROP VIEW dp_my_budget;
DROP VIEW dp_budgets;
ALTER TABLE dpnoise.budget DROP COLUMN strict;
COMMENT ON TABLE dpnoise.budget IS 'What each role was granted (epsilon, delta); written by the dp_budget_* functions.';

CREATE VIEW dp_budgets AS
SELECT b.role,
       b.epsilon AS epsilon_granted, coalesce(p.epsilon, 0) AS epsilon_spent,
       b.epsilon - coalesce(p.epsilon, 0) AS epsilon_remaining,
       b.delta AS delta_granted, coalesce(p.delta, 0) AS delta_spent,
       b.delta - coalesce(p.delta, 0) AS delta_remaining,
       -- A dropped role's budget and charges stay; its name does not.
       coalesce(r.rolname::text, 'dropped role ' || b.role::oid) AS role_name
FROM dpnoise.budget b LEFT JOIN dpnoise.spent p ON p.role = b.role
LEFT JOIN pg_catalog.pg_roles r ON r.oid = b.role;
CREATE VIEW dp_my_budget WITH (security_barrier) AS
SELECT * FROM dp_budgets WHERE role = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user)::regrole;
GRANT SELECT ON dp_my_budget TO PUBLIC;
COMMENT ON VIEW dp_budgets IS 'Every role''s budget: granted, spent and remaining epsilon and delta. Superusers only.';
COMMENT ON VIEW dp_my_budget IS 'The calling role''s own budget row.';
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


-- The ledger worker's charge no longer answers whether a role is strict.
DROP FUNCTION dpnoise.charge_batch(oid[], numeric[], numeric[], bigint[], text[], text[], integer[], timestamptz[], bytea[], boolean[]);
CREATE FUNCTION dpnoise.charge_batch(
    requesters oid[], epsilons numeric[], deltas numeric[], releases bigint[],
    mechanisms text[], statements text[], pids integer[], starts timestamptz[], identities bytea[], repeats boolean[])
RETURNS TABLE (granted boolean, remaining_epsilon numeric, remaining_delta numeric, is_free boolean)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    -- Per distinct role of the batch (usually one): what it has left and
    -- what this batch charges it.
    roles oid[] := '{}';
    left_epsilon numeric[] := '{}';
    left_delta numeric[] := '{}';
    charged_epsilon numeric[] := '{}';
    charged_delta numeric[] := '{}';
    capped boolean := false;
    cap_epsilon numeric;
    cap_delta numeric;
    g boolean[] := '{}';
    re numeric[] := '{}';
    rd numeric[] := '{}';
    cost_epsilon numeric;
    cost_delta numeric;
    one_epsilon numeric;
    one_delta numeric;
    one_cap_epsilon numeric;
    one_cap_delta numeric;
    j integer;
    -- Repeated releases (src/repeat): identities[i] holds the 32-byte
    -- identities request i pays for once and for all. With repeats[i], the
    -- request is granted free if all of them were paid before.
    paid bytea[];
    mine bytea[];
    fr boolean[] := '{}';
    ids bigint[] := '{}';
    new_identities bytea[] := '{}';
    new_ledger bigint[] := '{}';
BEGIN
    LOCK TABLE dpnoise.charge_lock IN EXCLUSIVE MODE;
    -- Most requests carry no identity: then nothing is looked up (a call
    -- of dpnoise.identities is parsed again at every execution).
    IF cardinality(array_remove(identities, NULL)) > 0 THEN
        SELECT coalesce(array_agg(p.identity), '{}') INTO paid FROM dpnoise.paid_releases p
        WHERE p.identity = ANY (ARRAY(SELECT dpnoise.identities(b) FROM unnest(identities) b));
    ELSE
        paid := '{}';
    END IF;
    -- One index lookup per role: each statement here runs for every batch,
    -- so each is kept to a plan that starts cheaply.
    FOR i IN 1 .. cardinality(requesters) LOOP
        CONTINUE WHEN requesters[i] = ANY (roles);
        -- The global cap, if any, comes along (a batch without a role with
        -- a budget grants nothing, so never needs it).
        SELECT b.epsilon - p.epsilon, b.delta - p.delta, c.epsilon, c.delta
        INTO one_epsilon, one_delta, one_cap_epsilon, one_cap_delta
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
        charged_epsilon := charged_epsilon || 0::numeric;
        charged_delta := charged_delta || 0::numeric;
    END LOOP;
    IF capped THEN
        SELECT cap_epsilon - coalesce(sum(s.epsilon), 0), cap_delta - coalesce(sum(s.delta), 0)
        INTO cap_epsilon, cap_delta FROM dpnoise.spent s;
    END IF;
    FOR i IN 1 .. cardinality(requesters) LOOP
        j := array_position(roles, requesters[i]);
        IF identities[i] IS NULL THEN
            mine := '{}';
        ELSE
            mine := ARRAY(SELECT dpnoise.identities(identities[i]));
        END IF;
        fr[i] := coalesce(repeats[i], false) AND cardinality(mine) > 0 AND mine <@ paid;
        ids[i] := NULL;
        IF fr[i] THEN
            -- Asked again: answered as before, by any role, and free.
            g[i] := true;
            re[i] := coalesce(CASE WHEN capped THEN least(left_epsilon[j], cap_epsilon) ELSE left_epsilon[j] END, 0);
            rd[i] := coalesce(CASE WHEN capped THEN least(left_delta[j], cap_delta) ELSE left_delta[j] END, 0);
            CONTINUE;
        END IF;
        IF left_epsilon[j] IS NULL THEN
            -- No budget (never granted, or revoked).
            g[i] := false; re[i] := 0; rd[i] := 0;
            CONTINUE;
        END IF;
        cost_epsilon := epsilons[i] * releases[i];
        cost_delta := deltas[i] * releases[i];
        g[i] := cost_epsilon <= left_epsilon[j] AND cost_delta <= left_delta[j]
                AND (NOT capped OR (cost_epsilon <= cap_epsilon AND cost_delta <= cap_delta));
        IF g[i] THEN
            left_epsilon[j] := left_epsilon[j] - cost_epsilon;
            left_delta[j] := left_delta[j] - cost_delta;
            charged_epsilon[j] := charged_epsilon[j] + cost_epsilon;
            charged_delta[j] := charged_delta[j] + cost_delta;
            cap_epsilon := cap_epsilon - cost_epsilon;
            cap_delta := cap_delta - cost_delta;
            ids[i] := nextval('dpnoise.ledger_id_seq');
            FOR k IN 1 .. cardinality(mine) LOOP
                CONTINUE WHEN mine[k] = ANY (paid);
                paid := paid || mine[k];
                new_identities := new_identities || mine[k];
                new_ledger := new_ledger || ids[i];
            END LOOP;
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
        INSERT INTO dpnoise.ledger (id, role, charged_at, statement, mechanism, epsilon, delta, releases, pid, session_start)
        SELECT u.id, u.r, clock_timestamp(), u.s, u.m, u.e, u.d, u.n, u.p, u.t
        FROM unnest(ids, requesters, statements, mechanisms, epsilons, deltas, releases, pids, starts)
             WITH ORDINALITY AS u(id, r, s, m, e, d, n, p, t, k)
        WHERE u.id IS NOT NULL ORDER BY u.k
    ), recorded AS (
        INSERT INTO dpnoise.paid_releases (identity, ledger_id)
        SELECT * FROM unnest(new_identities, new_ledger)
    )
    SELECT u.ok, u.e, u.d, u.free FROM unnest(g, re, rd, fr) WITH ORDINALITY AS u(ok, e, d, free, k) ORDER BY u.k;
END $$;
REVOKE EXECUTE ON FUNCTION dpnoise.charge_batch(oid[], numeric[], numeric[], bigint[], text[], text[], integer[], timestamptz[], bytea[], boolean[]) FROM PUBLIC;
COMMENT ON FUNCTION dpnoise.charge_batch(oid[], numeric[], numeric[], bigint[], text[], text[], integer[], timestamptz[], bytea[], boolean[]) IS
    'Charges a batch of releases; called by the ledger worker only.';
