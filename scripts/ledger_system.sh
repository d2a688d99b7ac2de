#!/usr/bin/env bash
# What the ledger says where it cannot charge: on a hot standby, and without
# shared_preload_libraries. Usage: ledger_system.sh DATADIR PORT (a primary
# started by lib.sh's start_server, with dpnoise installed). Uses PORT+1 and
# PORT+2, or the next free ports, for a standby and an unpreloaded server,
# both removed afterwards.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
DATA=$1 PORT=$2
DB=dpnoise_ledger_system
# Nothing else may hold the two ports (a CI machine may run more than us).
STANDBY_PORT=$(free_port $((PORT + 1)))
BARE_PORT=$(free_port $((STANDBY_PORT + 1)))
psql_at() { local port=$1; shift; "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$port" -U postgres -At "$@"; }
fail() { echo "FAIL: $*"; exit 1; }
# The SQLSTATE, message and hint of a statement that must fail.
refusal() {
  "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$1" -U postgres -d "$2" -v VERBOSITY=verbose -c "$3" 2>&1 || true
}

psql_at "$PORT" -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
psql_at "$PORT" -d $DB -c "CREATE EXTENSION dpnoise" -c "SELECT dp_budget_grant('postgres', 10)" >/dev/null

# A hot standby: every release refused with ZB002, saying to use the primary.
STANDBY=${TMPDIR:-/tmp}/dpnoise-standby-$PORT
rm -rf "$STANDBY"
mkdir -p "$STANDBY" && chown postgres:postgres "$STANDBY" && chmod 700 "$STANDBY"
as_postgres "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$PORT" -U postgres -D "$STANDBY" -R -X stream -c fast 2>/dev/null
cat >>"$STANDBY/postgresql.conf" <<CONF
port = $STANDBY_PORT
unix_socket_directories = '$STANDBY'
CONF
pg_ctl_up "$STANDBY" start
trap 'as_postgres "$PG_BIN/pg_ctl" -D "$STANDBY" -m fast -w stop >/dev/null 2>&1 || true; rm -rf "$STANDBY"' EXIT
[ "$(psql_at $STANDBY_PORT -d $DB -c 'SELECT pg_is_in_recovery()')" = t ] || fail "the standby is not in recovery"
out=$(refusal $STANDBY_PORT $DB "SELECT dp_count(1.0) FROM generate_series(1, 10)")
echo "$out" | grep -q "ZB002" && echo "$out" | grep -q "standby" && echo "$out" | grep -q "HINT:.*primary" \
  || fail "a release on a standby: $out"
echo "standby: releases refused with ZB002, pointing to the primary"
as_postgres "$PG_BIN/pg_ctl" -D "$STANDBY" -m fast -w stop >/dev/null
rm -rf "$STANDBY"

# No shared_preload_libraries: CREATE EXTENSION warns, a release says how to fix it.
BARE=${TMPDIR:-/tmp}/dpnoise-bare-$PORT
rm -rf "$BARE"
mkdir -p "$BARE" && chown postgres:postgres "$BARE" && chmod 700 "$BARE"
as_postgres "$PG_BIN/initdb" -D "$BARE" --auth=trust -U postgres >/dev/null
cat >>"$BARE/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $BARE_PORT
unix_socket_directories = '$BARE'
CONF
pg_ctl_up "$BARE" start
trap 'as_postgres "$PG_BIN/pg_ctl" -D "$BARE" -m fast -w stop >/dev/null 2>&1 || true; rm -rf "$BARE"' EXIT
out=$("$PG_BIN/psql" -X -q -h 127.0.0.1 -p $BARE_PORT -U postgres -d postgres -c "CREATE EXTENSION dpnoise" 2>&1)
echo "$out" | grep -q "WARNING:.*shared_preload_libraries" || fail "CREATE EXTENSION without the preload: $out"
out=$(refusal $BARE_PORT postgres "SELECT dp_count(1.0) FROM generate_series(1, 10)")
echo "$out" | grep -q "ZB002" && echo "$out" | grep -q "HINT:.*shared_preload_libraries" || fail "a release without the preload: $out"
echo "no preload: CREATE EXTENSION warns; releases refused with ZB002 and the fix"

# Parallel queries holding every free background-worker slot (4: the
# logical replication launcher, the ledger pool of 2, one more): a release is
# still charged, by a ledger worker reserved when the server started.
cat >>"$BARE/postgresql.conf" <<CONF
shared_preload_libraries = 'dpnoise'
max_worker_processes = 4
CONF
pg_ctl_up "$BARE" restart
psql_at $BARE_PORT -d postgres -c "DROP EXTENSION dpnoise" -c "CREATE EXTENSION dpnoise" \
  -c "SELECT dp_budget_grant('postgres', 10)" -c "CREATE TABLE big AS SELECT i FROM generate_series(1, 600) i" \
  -c "ALTER TABLE big SET (parallel_workers = 8)" >/dev/null
# Three sessions asking 8 parallel workers each take every free slot.
holders=()
for _ in 1 2 3; do
  psql_at $BARE_PORT -d postgres -c "SET parallel_setup_cost = 0" -c "SET parallel_tuple_cost = 0" \
    -c "SET min_parallel_table_scan_size = 0" -c "SET max_parallel_workers_per_gather = 8" \
    -c "SELECT count(*) FROM big WHERE pg_sleep(0.01) IS NULL" >/dev/null &
  holders+=($!)
done
for _ in $(seq 1 50); do
  busy=$(psql_at $BARE_PORT -d postgres -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker'")
  [ "$busy" -ge 1 ] && break
  sleep 0.1
done
# Until every holder is running (each took what slots were left).
for _ in $(seq 1 50); do
  running=$(psql_at $BARE_PORT -d postgres -c "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(0.01)%' AND backend_type = 'client backend' AND state = 'active' AND pid <> pg_backend_pid()")
  [ "$running" -ge 3 ] && break
  sleep 0.1
done
busy=$(psql_at $BARE_PORT -d postgres -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker'")
[ "$busy" -ge 1 ] || fail "the parallel query did not take the free worker slot"
out=$(refusal $BARE_PORT postgres "SELECT dp_count(1.0) IS NOT NULL AS released FROM generate_series(1, 10)")
wait "${holders[@]}"
echo "$out" | grep -q "^ t" || fail "a release while parallel workers hold every free slot: $out"
echo "worker slots: $busy parallel workers hold every free slot, and a release is still charged"
psql_at "$PORT" -d postgres -c "DROP DATABASE $DB WITH (FORCE)"
