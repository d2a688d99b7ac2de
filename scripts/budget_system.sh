#!/usr/bin/env bash
# Budget must-holds that need more than one session: crashes (2) and
# concurrency (3). Usage: budget_system.sh DATADIR PORT (a server started
# by lib.sh's start_server, with dpnoise installed). Exits non-zero on failure.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
DATA=$1 PORT=$2
DB=dpnoise_budget_system
psql_() { "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U postgres -At "$@"; }
fail() { echo "FAIL: $*"; exit 1; }

psql_ -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
psql_ -d $DB <<'SQL'
CREATE EXTENSION dpnoise;
CREATE TABLE one_row AS SELECT 1 AS x;
DROP ROLE IF EXISTS crowd;
CREATE ROLE crowd LOGIN;
GRANT SELECT ON one_row TO crowd;
SELECT dp_budget_grant('postgres', 100);
SQL

# 2. No release before its charge is durable: release, then kill -9 the
# backend that released (the postmaster resets every process and replays
# WAL), then stop the server in immediate mode right after a release.
charges() { psql_ -d $DB -c "SELECT count(*) FROM dpnoise.ledger WHERE statement LIKE '%$1%'"; }
# The session stays open after its release (pg_sleep), so the kill hits
# the backend that released, not one already exiting.
"$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PORT" -U postgres -d $DB \
  -c "SELECT dp_count(1.0) /* crash-kill */ FROM one_row" -c "SELECT pg_sleep(60) /* sleeper */" >/dev/null 2>&1 &
pid=
for _ in $(seq 1 100); do
  pid=$(psql_ -d $DB -c "SELECT pid FROM pg_stat_activity WHERE query LIKE '%/* sleeper */%' AND pid <> pg_backend_pid()")
  [ -n "$pid" ] && break
  sleep 0.1
done
[ -n "$pid" ] || fail "the releasing session did not reach its sleep"
kill -9 "$pid"
wait || true
for _ in $(seq 1 60); do psql_ -d $DB -c "SELECT 1" >/dev/null 2>&1 && break; sleep 0.5; done
[ "$(charges crash-kill)" = 1 ] || fail "the charge of a release was lost when its backend was killed"
echo "crash (SIGKILL of the releasing backend): charge kept"

psql_ -d $DB -c "SELECT dp_count(1.0) /* crash-immediate */ FROM one_row" >/dev/null
as_postgres "$PG_BIN/pg_ctl" -D "$DATA" -m immediate -w stop >/dev/null
pg_ctl_up "$DATA" start
[ "$(charges crash-immediate)" = 1 ] || fail "the charge of a release was lost in an immediate shutdown"
echo "crash (immediate shutdown right after a release): charge kept"

# 3. Concurrency: 16 sessions race for a budget that pays for exactly N
# releases; exactly N succeed and the ledger sums to N·ε.
N=25
psql_ -d $DB -c "SELECT dp_budget_grant('crowd', $N * 0.01)"
tmp=$(mktemp -d)
for s in $(seq 1 16); do
  (for _ in $(seq 1 4); do
     "$PG_BIN/psql" -X -h 127.0.0.1 -p "$PORT" -U crowd -d $DB -At -c "SELECT dp_count(0.01) FROM one_row" 2>&1 || true
   done >"$tmp/$s") &
done
wait
ok=$(cat "$tmp"/* | grep -cE '^-?[0-9]+$' || true)
refused=$(cat "$tmp"/* | grep -c 'privacy budget exhausted' || true)
cat "$tmp"/* | sed -E "s/^-?[0-9]+$/<number>/" | sort | uniq -c | sort -rn | head -5
rm -rf "$tmp"
ledger=$(psql_ -d $DB -c "SELECT count(*) || ' ' || sum(epsilon * releases) FROM dpnoise.ledger WHERE role = 'crowd'::regrole")
echo "concurrency: 16 sessions x 4 releases against a budget for $N: $ok released, $refused refused, ledger: $ledger"
[ "$ok" = "$N" ] || fail "expected exactly $N releases, got $ok"
[ "$refused" = $((64 - N)) ] || fail "expected $((64 - N)) refusals, got $refused"
[ "$ledger" = "$N 0.$N" ] || fail "ledger should hold $N charges summing to 0.$N, holds $ledger"

# The same race under zCDP: a budget of exactly N releases' rho (one
# release's, as the ledger records it, times N), given as rho.
psql_ -d $DB -c "DROP ROLE IF EXISTS crowd_z" -c "CREATE ROLE crowd_z LOGIN" -c "GRANT SELECT ON one_row TO crowd_z"
psql_ -d $DB -c "SELECT dp_count(0.01) FROM one_row" >/dev/null
one=$(psql_ -d $DB -c "SELECT rho FROM dpnoise.ledger ORDER BY id DESC LIMIT 1")
psql_ -d $DB -c "SELECT dp_budget_grant_rho('crowd_z', $N * $one)"
tmp=$(mktemp -d)
for s in $(seq 1 16); do
  (for _ in $(seq 1 4); do
     "$PG_BIN/psql" -X -h 127.0.0.1 -p "$PORT" -U crowd_z -d $DB -At -c "SELECT dp_count(0.01) FROM one_row" 2>&1 || true
   done >"$tmp/$s") &
done
wait
ok=$(cat "$tmp"/* | grep -cE '^-?[0-9]+$' || true)
refused=$(cat "$tmp"/* | grep -c 'its rho ran out' || true)
rm -rf "$tmp"
ledger=$(psql_ -d $DB -c "SELECT count(*) || ' ' || (sum(rho * releases) = $N * $one) FROM dpnoise.ledger WHERE role = 'crowd_z'::regrole")
echo "concurrency under zCDP: 16 sessions x 4 releases against rho for $N: $ok released, $refused refused, ledger: $ledger"
[ "$ok" = "$N" ] || fail "zCDP: expected exactly $N releases, got $ok"
[ "$refused" = $((64 - N)) ] || fail "zCDP: expected $((64 - N)) refusals (rho), got $refused"
[ "$ledger" = "$N true" ] || fail "zCDP: the ledger should hold $N charges summing to $N times $one, holds $ledger"
psql_ -d postgres -c "DROP DATABASE $DB WITH (FORCE)"
psql_ -d postgres -c "DROP ROLE IF EXISTS crowd_z"
echo "budget system tests: passed"
