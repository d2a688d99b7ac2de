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
