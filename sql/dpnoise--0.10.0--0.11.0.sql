-- dpnoise 0.10.0 -> 0.11.0: the ledger worker charges faster. charge_batch
-- looks up paid releases only for requests that carry an identity (most
-- carry none), and the worker plans its statements once per session.
CREATE OR REPLACE FUNCTION dpnoise.charge_batch(
    requesters oid[], epsilons numeric[], deltas numeric[], releases bigint[],
    mechanisms text[], statements text[], pids integer[], starts timestamptz[], identities bytea[], repeats boolean[])
RETURNS TABLE (granted boolean, is_strict boolean, remaining_epsilon numeric, remaining_delta numeric, is_free boolean)
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
    -- Repeated releases (src/repeat): identities[i] holds the 32-byte
    -- identities request i pays for once and for all (not a strict role's:
    -- it pays per group). With repeats[i], the request is granted free if
    -- all of them were paid before.
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
        IF identities[i] IS NULL THEN
            mine := '{}';
        ELSE
            mine := ARRAY(SELECT dpnoise.identities(identities[i]));
        END IF;
        fr[i] := coalesce(repeats[i], false) AND cardinality(mine) > 0 AND mine <@ paid;
        ids[i] := NULL;
        IF fr[i] THEN
            -- Asked again: answered as before, by any role, and free.
            g[i] := true; st[i] := coalesce(strict_of[j], false);
            re[i] := coalesce(CASE WHEN capped THEN least(left_epsilon[j], cap_epsilon) ELSE left_epsilon[j] END, 0);
            rd[i] := coalesce(CASE WHEN capped THEN least(left_delta[j], cap_delta) ELSE left_delta[j] END, 0);
            CONTINUE;
        END IF;
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
            ids[i] := nextval('dpnoise.ledger_id_seq');
            IF NOT st[i] THEN
                FOR k IN 1 .. cardinality(mine) LOOP
                    CONTINUE WHEN mine[k] = ANY (paid);
                    paid := paid || mine[k];
                    new_identities := new_identities || mine[k];
                    new_ledger := new_ledger || ids[i];
                END LOOP;
            END IF;
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
    SELECT u.ok, u.strict, u.e, u.d, u.free FROM unnest(g, st, re, rd, fr) WITH ORDINALITY AS u(ok, strict, e, d, free, k) ORDER BY u.k;
END $$;
