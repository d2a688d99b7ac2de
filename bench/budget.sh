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
# "ahead 64": enforcement on, each session paying for 64 releases at a
# time (dpnoise.charge_ahead), the rest given back as it ends.
printf "%-6s %12s %12s %8s %12s %8s\n" round "tps off" "tps on" "on/off" "ahead 64" "/off"
for r in $(seq 1 "$ROUNDS"); do
  off=$(tps off)
  on=$(tps on)
  ahead=$(tps on 64)
  printf "%-6s %12.0f %12.0f %8.2f %12.0f %8.2f\n" "$r" "$off" "$on" "$(echo "$on / $off" | bc -l)" \
    "$ahead" "$(echo "$ahead / $off" | bc -l)"
done
echo "ledger rows: $(psql_ -d $DB -At -c 'SELECT count(*) FROM dpnoise.ledger')"

# A strict role pays for every group: 10^4 groups, hashed and sorted, its
# charges (each one synchronous commit) and the statement's time, for a
# session's first statement (it learns there that the role is strict) and
# its next one.
psql_ -d $DB -c "CREATE TABLE groups AS SELECT i % 10000 AS g FROM generate_series(1, 100000) i" -c "ANALYZE groups" \
  -c "DROP ROLE IF EXISTS strict_bench" -c "CREATE ROLE strict_bench" -c "GRANT SELECT ON groups TO strict_bench" \
  -c "SELECT dp_budget_grant('strict_bench', 1e9)" -c "SELECT dp_budget_set_strict('strict_bench')"  >/dev/null
printf "%-36s %10s %10s %10s\n" "strict role, 10^4 groups" "ms" "charges" "releases"
for mode in hashed sorted; do
  hash=$([ $mode = hashed ] && echo on || echo off)
  statement='
SELECT coalesce(max(id), 0) AS last FROM dpnoise.ledger \gset
SET ROLE strict_bench;
\timing on
SELECT count(*) FROM (SELECT g, dp_count(0.001) FROM groups GROUP BY g) s;
\timing off
RESET ROLE;
SELECT count(*), sum(releases) FROM dpnoise.ledger WHERE id > :last AND role = '"'strict_bench'::regrole;"
  out=$(printf 'SET enable_hashagg = %s;\n%s\n%s\n' "$hash" "$statement" "$statement" | psql_ -d $DB -At -F ' ')
  mapfile -t times < <(sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' <<<"$out")
  mapfile -t counts < <(grep -E '^[0-9]+ -?[0-9]+$' <<<"$out")
  for i in 0 1; do
    label="$mode, $([ $i = 0 ] && echo "session's first" || echo "next statement")"
    read -r charges releases <<<"${counts[$i]}"
    printf "%-36s %10.0f %10s %10s\n" "$label" "${times[$i]}" "$charges" "$releases"
  done
done
psql_ -d $DB -c "DROP TABLE groups" -c "DROP OWNED BY strict_bench" -c "DROP ROLE strict_bench" >/dev/null
