#!/usr/bin/env bash
# Throughput of charged releases: pgbench, 8 clients, one-row table,
# `SELECT dp_count(1.0) FROM one_row`, with budget enforcement off, on, and
# on with sessions paying ahead, alternating in one run. Prints
# transactions per second and the ratios to off.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
PORT=${DPNOISE_BENCH_PORT:-54318}
DATA=${TMPDIR:-/tmp}/dpnoise-bench-budget
SECONDS_PER_RUN=${SECONDS_PER_RUN:-15}
ROUNDS=${ROUNDS:-3}
DB=dpnoise_bench_budget

bash "$REPO/scripts/setup.sh" >/dev/null
install_extension
start_server "$DATA" "$PORT"
trap 'stop_server "$DATA"; rm -f "$script"' EXIT
psql_() { "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PORT" -U postgres "$@"; }
psql_ -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
psql_ -d $DB -c "CREATE EXTENSION dpnoise" -c "CREATE TABLE one_row AS SELECT 1 AS x" \
  -c "SELECT dp_budget_grant('postgres', 1e12)"
script=$(mktemp)
echo "SELECT dp_count(1.0) FROM one_row;" >"$script"
chmod 644 "$script"

tps() { # enforce(on|off) [charge_ahead]
  PGOPTIONS="-c dpnoise.enforce_budget=$1 -c dpnoise.charge_ahead=${2:-0}" "$PG_BIN/pgbench" -n -h 127.0.0.1 -p "$PORT" -U postgres \
    -c 8 -j 2 -T "$SECONDS_PER_RUN" -f "$script" $DB 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}
# "ahead 64": enforcement on, each session reserving 64 times its first
# statement's cost (dpnoise.charge_ahead) and drawing on it, the rest given
# back as it ends.
printf "%-6s %12s %12s %8s %12s %8s\n" round "tps off" "tps on" "on/off" "ahead 64" "/off"
for r in $(seq 1 "$ROUNDS"); do
  off=$(tps off)
  on=$(tps on)
  ahead=$(tps on 64)
  printf "%-6s %12.0f %12.0f %8.2f %12.0f %8.2f\n" "$r" "$off" "$on" "$(echo "$on / $off" | bc -l)" \
    "$ahead" "$(echo "$ahead / $off" | bc -l)"
done
echo "ledger rows: $(psql_ -d $DB -At -c 'SELECT count(*) FROM dpnoise.ledger')"
