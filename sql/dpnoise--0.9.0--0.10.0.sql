-- dpnoise 0.9.0 -> 0.10.0: repeated releases. A release asked again with
-- the same identity is answered identically and free; the ledger records
-- the releases paid once and for all (dpnoise.paid_releases); dp_track logs
-- the writes to a table.
--
-- The ledger worker of 0.10.0 calls charge_batch with identities: until
-- this update runs, a server with the new library refuses releases (ZB002).
CREATE TABLE dpnoise.paid_releases (
    identity  bytea PRIMARY KEY CHECK (pg_catalog.length(identity) = 32),
    ledger_id bigint NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('dpnoise.paid_releases', '');
COMMENT ON TABLE dpnoise.paid_releases IS 'The releases paid for once and for all, by the ledger row that paid them: asked again, they are free.';
DROP FUNCTION dpnoise.charge_batch(oid[], numeric[], numeric[], bigint[], text[], text[], integer[], timestamptz[]);
-- The 32-byte identities concatenated in a charge request.
CREATE FUNCTION dpnoise.identities(packed bytea) RETURNS SETOF bytea
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT substring(packed FROM 1 + 32 * n FOR 32) FROM generate_series(0, coalesce(length(packed), 0) / 32 - 1) n
$$;

CREATE FUNCTION dpnoise.charge_batch(
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
    SELECT coalesce(array_agg(p.identity), '{}') INTO paid FROM dpnoise.paid_releases p
    WHERE p.identity = ANY (ARRAY(SELECT dpnoise.identities(b) FROM unnest(identities) b));
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
        mine := ARRAY(SELECT dpnoise.identities(identities[i]));
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
REVOKE EXECUTE ON FUNCTION dpnoise.charge_batch(oid[], numeric[], numeric[], bigint[], text[], text[], integer[], timestamptz[], bytea[], boolean[]), dpnoise.identities(bytea) FROM PUBLIC;
COMMENT ON FUNCTION dpnoise.charge_batch(oid[], numeric[], numeric[], bigint[], text[], text[], integer[], timestamptz[], bytea[], boolean[]) IS
    'Charges a batch of releases; called by the ledger worker only.';
COMMENT ON FUNCTION dpnoise.identities(bytea) IS 'The 32-byte release identities concatenated in a charge request.';

-- Repeated releases (src/repeat) ------------------------------------------
-- The secret under which a release's identity and noise are derived. Only
-- superusers can read it (the schema is theirs). 256 bits from
-- pg_strong_random (three version-4 UUIDs, 366 random bits, hashed). It is
-- not dumped: a restored database has a new key, so every release is new
-- (charged again), never answered with noise another key would give.
CREATE TABLE dpnoise.release_key (
    key     bytea NOT NULL CHECK (pg_catalog.length(key) = 32),
    created timestamptz NOT NULL DEFAULT pg_catalog.now()
);
INSERT INTO dpnoise.release_key (key)
SELECT pg_catalog.sha256(pg_catalog.convert_to(
    pg_catalog.gen_random_uuid()::text || pg_catalog.gen_random_uuid()::text || pg_catalog.gen_random_uuid()::text, 'UTF8'));
CREATE UNIQUE INDEX release_key_one ON dpnoise.release_key ((true));

-- One row per transaction that wrote a tracked table, written by that
-- transaction (dp_track's trigger): visible exactly when its rows are.
-- The ledger worker merges a table's rows into one (n: the transactions it
-- stands for, xid: the newest), when a statement finds many.
CREATE TABLE dpnoise.writes (
    rel oid NOT NULL,
    xid xid8 NOT NULL,
    n   bigint NOT NULL DEFAULT 1,
    PRIMARY KEY (rel, xid)
);

CREATE FUNCTION dpnoise.track_write() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO dpnoise.writes (rel, xid) VALUES (TG_RELID, pg_catalog.pg_current_xact_id())
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

CREATE FUNCTION dp_track(rel regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    kind "char";
BEGIN
    IF rel IS NULL THEN
        RAISE EXCEPTION 'rel must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT c.relkind INTO kind FROM pg_catalog.pg_class c WHERE c.oid = rel AND c.relpersistence = 'p';
    IF kind IS DISTINCT FROM 'r' OR EXISTS (SELECT 1 FROM pg_catalog.pg_inherits i WHERE i.inhrelid = rel) THEN
        RAISE EXCEPTION 'dp_track: % is not an ordinary, logged table without a parent', rel USING ERRCODE = 'wrong_object_type',
            HINT = 'A write through a parent does not fire the table''s own statement triggers, and a crash empties an unlogged table without any: partitions, inheritance children, unlogged and temporary tables are never tracked.';
    END IF;
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = rel) THEN
            RAISE EXCEPTION 'dp_track: % is a Citus table, whose writes happen on its shards', rel
                USING ERRCODE = 'feature_not_supported';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t WHERE t.tgrelid = rel AND t.tgname = 'dpnoise_track') THEN
        EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ALWAYS TRIGGER dpnoise_track', rel);
        RETURN;
    END IF;
    EXECUTE pg_catalog.format(
        'CREATE TRIGGER dpnoise_track AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON %s '
        'FOR EACH STATEMENT EXECUTE FUNCTION dpnoise.track_write()', rel);
    -- Fires in every session, also with session_replication_role = replica.
    EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ALWAYS TRIGGER dpnoise_track', rel);
END $$;

CREATE FUNCTION dp_untrack(rel regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF rel IS NULL THEN
        RAISE EXCEPTION 'rel must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS dpnoise_track ON %s', rel);
END $$;

-- What is tracked, and how many writing transactions each table has seen.
CREATE VIEW dp_tracked_tables AS
SELECT t.tgrelid::regclass AS rel, t.tgenabled = 'A' AS tracking,
       (SELECT pg_catalog.sum(w.n) FROM dpnoise.writes w WHERE w.rel = t.tgrelid) AS writes
FROM pg_catalog.pg_trigger t
WHERE t.tgname = 'dpnoise_track' AND t.tgfoid = 'dpnoise.track_write()'::regprocedure;

REVOKE EXECUTE ON FUNCTION dpnoise.track_write(), dp_track(regclass), dp_untrack(regclass) FROM PUBLIC;
REVOKE ALL ON dp_tracked_tables FROM PUBLIC;

COMMENT ON TABLE dpnoise.release_key IS 'The secret that derives repeated releases'' identities and noise; superusers only. Never change it by hand.';
COMMENT ON TABLE dpnoise.writes IS 'One row per transaction that wrote a tracked table, written by that transaction (dp_track); the ledger worker merges them (n: how many).';
COMMENT ON FUNCTION dpnoise.track_write() IS 'dp_track''s statement trigger: logs the writing transaction.';
COMMENT ON FUNCTION dp_track(regclass) IS 'Tracks writes to a table, so that a release over it asked again is answered identically and free until it is written. Superusers only.';
COMMENT ON FUNCTION dp_untrack(regclass) IS 'Stops tracking a table: releases over it are fresh (charged) again.';
COMMENT ON VIEW dp_tracked_tables IS 'The tables whose releases can be answered again, and how many transactions wrote each.';
