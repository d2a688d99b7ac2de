-- dpnoise 0.16.0 → 0.17.0: the release store (src/repeat/store.sql). A repeat is
-- answered from what was released, not re-executed; these show and empty it.
-- The release store (src/repeat/store.rs): what repeats are answered from,
-- in shared memory, for superusers only. An answer is shown by its key
-- (an HMAC under the database's secret key), its size and its rows, never
-- its values; the store is the server's, shared by its databases.
CREATE FUNCTION dp_release_store(OUT answer bytea, OUT bytes integer, OUT rows bigint)
    RETURNS SETOF record AS 'MODULE_PATHNAME', 'dp_release_store_entries_wrapper' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION dp_release_store_reset() RETURNS bigint
    AS 'MODULE_PATHNAME', 'dp_release_store_reset_wrapper' LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE EXECUTE ON FUNCTION dp_release_store(), dp_release_store_reset() FROM PUBLIC;
COMMENT ON FUNCTION dp_release_store() IS
    'The answers repeats are served from (key, bytes, rows): 8 MiB and 4096 answers at most, the oldest overwritten first, emptied by a restart. Superusers only.';
COMMENT ON FUNCTION dp_release_store_reset() IS
    'Empties the release store (every database''s); returns how many answers it held. Their repeats are then charged, with fresh noise. Superusers only.';
