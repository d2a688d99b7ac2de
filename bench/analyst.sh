#!/usr/bin/env bash
# Benchmark (issue 14): an analyst's admitted GROUP BY against the same
# plain GROUP BY with count/sum by a curator, on 10M rows in 100 groups,
# alternating in one run; prints the median times and their ratio. Also the
# bounded form (several rows per person: per-person combination and the
# random choice of groups) on 10M rows of 1M persons. Not a test.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
PORT=${DPNOISE_BENCH_PORT:-54319}
DATA=${TMPDIR:-/tmp}/dpnoise-bench-analyst
ROWS=${ROWS:-10000000}
RUNS=${RUNS:-5}
DB=dpnoise_bench_analyst

bash "$REPO/scripts/setup.sh" >/dev/null
install_extension
start_server "$DATA" "$PORT"
trap 'stop_server "$DATA"' EXIT
psql_() { "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PORT" "$@"; }
psql_ -U postgres -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
psql_ -U postgres -d $DB <<SQL
CREATE EXTENSION dpnoise;
DO \$\$ BEGIN CREATE ROLE bench_analyst LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END \$\$;
-- One row per person, 100 groups.
CREATE TABLE people (person_id bigint PRIMARY KEY, g int, x float8);
INSERT INTO people SELECT i, i % 100, (i % 1000) / 10.0 FROM generate_series(1, $ROWS) i;
-- Ten rows per person, each person in up to 10 of the 100 groups.
CREATE TABLE visits (person_id bigint, g int, x float8);
INSERT INTO visits SELECT i % ($ROWS / 10), (i * 7) % 100, (i % 1000) / 10.0 FROM generate_series(1, $ROWS) i;
VACUUM ANALYZE people; VACUUM ANALYZE visits;
SELECT dp_protect('people', 'person_id'), dp_protect('visits', 'person_id', 10);
SELECT dp_analyst('bench_analyst');
SELECT dp_budget_grant('bench_analyst', 1e9, 1);
SQL

# time_of ROLE SQL: the server-side time of one statement, in ms (psql's \timing).
time_of() {
  psql_ -U "$1" -d $DB -c '\timing on' -c "SELECT count(*) FROM ($2) s" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1
}
plain="SELECT g, count(*), sum(x) FROM people GROUP BY g"
admitted="SELECT g, dp_count(1.0), dp_sum(x, 1.0, 0, 100) FROM people GROUP BY g"
plain_multi="SELECT g, count(DISTINCT person_id), sum(x) FROM visits GROUP BY g"
bounded="SELECT g, dp_count(1.0), dp_sum(x, 1.0, 0, 1000) FROM visits GROUP BY g"
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
declare -a tp ta tm tb
for r in $(seq 1 "$RUNS"); do
  tp+=("$(time_of postgres "$plain")"); ta+=("$(time_of bench_analyst "$admitted")")
  tm+=("$(time_of postgres "$plain_multi")"); tb+=("$(time_of bench_analyst "$bounded")")
done
mp=$(printf '%s\n' "${tp[@]}" | median); ma=$(printf '%s\n' "${ta[@]}" | median)
mm=$(printf '%s\n' "${tm[@]}" | median); mb=$(printf '%s\n' "${tb[@]}" | median)
echo "rows: $ROWS, runs: $RUNS (median ms)"
printf "%-62s %10s\n" "plain GROUP BY, count/sum (curator), one row per person" "$mp"
printf "%-62s %10s   ratio %s\n" "analyst: dp_count/dp_sum GROUP BY (selection, prepaid)" "$ma" "$(awk -v a="$ma" -v b="$mp" 'BEGIN {printf "%.2f", a / b}')"
printf "%-62s %10s\n" "plain GROUP BY, count(DISTINCT person)/sum, 10 rows per person" "$mm"
printf "%-62s %10s   ratio %s\n" "analyst: bounded (per person, 10 groups each)" "$mb" "$(awk -v a="$mb" -v b="$mm" 'BEGIN {printf "%.2f", a / b}')"
