#!/usr/bin/env bash
# Benchmark (issues 14, 38): an analyst's admitted GROUP BY against the same
# plain GROUP BY by a curator, alternating in one run; prints the median
# times, their ratios and the backends' peak memory. Not a test.
# - one row per person: 10M persons in 100 groups, dp_count/dp_sum against
#   count/sum;
# - several rows per person (bounded): 1M persons with 10 rows each, in 10
#   of the 100 groups, against count(DISTINCT person)/sum;
# - the bounded query's memory for 1M and for 10M persons (10M persons of
#   one row each, in a table protected as several rows per person);
# - all rows, no GROUP BY (issue 47): dp_count/dp_sum over visits against
#   count(DISTINCT person)/sum, by the person (the default) and by the
#   window of the grouped levels (dpnoise.bounding_by_person = off, for a
#   second analyst role: the old path's figure, from the same run), and the
#   total's memory for 1M and 10M persons.
# Each statement's own output is timed (a wrapping count(*) would let the
# planner drop the aggregates it does not read).
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
PORT=${DPNOISE_BENCH_PORT:-54319}
DATA=${TMPDIR:-/tmp}/dpnoise-bench-analyst
ROWS=${ROWS:-10000000}
RUNS=${RUNS:-5}
DB=dpnoise_bench_analyst
PERSONS=$((ROWS / 10))

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
-- Ten rows per person, each in another of the person's 10 groups.
CREATE TABLE visits (person_id bigint, g int, x float8);
INSERT INTO visits SELECT i % $PERSONS, (7 * (i % $PERSONS) + 13 * (i / $PERSONS)) % 100, (i % 1000) / 10.0
FROM generate_series(0, $ROWS - 1) i;
-- One row per person, protected as several: the bounding runs on $ROWS persons.
CREATE TABLE visits_once (person_id bigint, g int, x float8);
INSERT INTO visits_once SELECT i, i % 100, (i % 1000) / 10.0 FROM generate_series(1, $ROWS) i;
VACUUM ANALYZE people; VACUUM ANALYZE visits; VACUUM ANALYZE visits_once;
SELECT dp_protect('people', 'person_id'), dp_protect('visits', 'person_id', 10), dp_protect('visits_once', 'person_id', 10);
SELECT dp_analyst('bench_analyst');
SELECT dp_budget_grant('bench_analyst', 1e9, 1);
DO \$\$ BEGIN CREATE ROLE bench_window LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END \$\$;
ALTER ROLE bench_window SET dpnoise.bounding_by_person = off;
SELECT dp_analyst('bench_window');
SELECT dp_budget_grant('bench_window', 1e9, 1);
SQL

# time_of ROLE SQL: the server-side time of one statement, in ms (psql's \timing).
time_of() {
  psql_ -U "$1" -d $DB -c '\timing on' -c '\o /dev/null' -c "$2" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1
}
# peak_of ROLE SQL: the peak resident memory of a fresh backend that ran it, in MB.
peak_of() {
  psql_ -U "$1" -d $DB -At -c "SELECT pg_backend_pid()" -c '\o /dev/null' -c "$2" -c '\o' \
      -c "SELECT 'done'" | {
    read -r pid
    awk '/^VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status"
    cat >/dev/null
  }
}
plain="SELECT g, count(*), sum(x) FROM people GROUP BY g"
admitted="SELECT g, dp_count(1.0), dp_sum(x, 1.0, 0, 100) FROM people GROUP BY g"
plain_multi="SELECT g, count(DISTINCT person_id), sum(x) FROM visits GROUP BY g"
bounded="SELECT g, dp_count(1.0), dp_sum(x, 1.0, 0, 1000) FROM visits GROUP BY g"
bounded_once="SELECT g, dp_count(1.0), dp_sum(x, 1.0, 0, 1000) FROM visits_once GROUP BY g"
plain_total="SELECT count(DISTINCT person_id), sum(x) FROM visits"
total="SELECT dp_count(1.0), dp_sum(x, 1.0, 0, 1000) FROM visits"
total_once="SELECT dp_count(1.0), dp_sum(x, 1.0, 0, 1000) FROM visits_once"
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
declare -a tp ta tm tb tt tn tw
for r in $(seq 1 "$RUNS"); do
  tp+=("$(time_of postgres "$plain")"); ta+=("$(time_of bench_analyst "$admitted")")
  tm+=("$(time_of postgres "$plain_multi")"); tb+=("$(time_of bench_analyst "$bounded")")
  tt+=("$(time_of postgres "$plain_total")"); tn+=("$(time_of bench_analyst "$total")")
  tw+=("$(time_of bench_window "$total")")
done
mt=$(printf '%s\n' "${tt[@]}" | median); mn=$(printf '%s\n' "${tn[@]}" | median)
mw=$(printf '%s\n' "${tw[@]}" | median)
mp=$(printf '%s\n' "${tp[@]}" | median); ma=$(printf '%s\n' "${ta[@]}" | median)
mm=$(printf '%s\n' "${tm[@]}" | median); mb=$(printf '%s\n' "${tb[@]}" | median)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo "rows: $ROWS, runs: $RUNS (median ms)"
printf "%-66s %10s\n" "plain GROUP BY, count/sum (curator), one row per person" "$mp"
printf "%-66s %10s   ratio %s\n" "analyst: dp_count/dp_sum GROUP BY (selection, prepaid)" "$ma" "$(ratio "$ma" "$mp")"
printf "%-66s %10s\n" "plain GROUP BY, count(DISTINCT person)/sum, 10 rows per person" "$mm"
printf "%-66s %10s   ratio %s\n" "analyst: bounded ($PERSONS persons, 10 groups each, k = 10)" "$mb" "$(ratio "$mb" "$mm")"
printf "%-66s %10s\n" "plain count(DISTINCT person)/sum, all rows" "$mt"
printf "%-66s %10s   ratio %s\n" "analyst: bounded total, by person" "$mn" "$(ratio "$mn" "$mt")"
printf "%-66s %10s   ratio %s\n" "analyst: bounded total, by the window (the old path)" "$mw" "$(ratio "$mw" "$mt")"
echo "peak backend memory (VmHWM, MB; work_mem $(psql_ -U postgres -d $DB -At -c 'SHOW work_mem'), hash_mem_multiplier $(psql_ -U postgres -d $DB -At -c 'SHOW hash_mem_multiplier'))"
printf "%-66s %10s\n" "plain count(DISTINCT person)/sum, $PERSONS persons" "$(peak_of postgres "$plain_multi")"
printf "%-66s %10s\n" "analyst: bounded, $PERSONS persons" "$(peak_of bench_analyst "$bounded")"
printf "%-66s %10s\n" "analyst: bounded, $ROWS persons" "$(peak_of bench_analyst "$bounded_once")"
printf "%-66s %10s\n" "analyst: bounded total, $PERSONS persons" "$(peak_of bench_analyst "$total")"
printf "%-66s %10s\n" "analyst: bounded total, $ROWS persons" "$(peak_of bench_analyst "$total_once")"
