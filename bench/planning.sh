#!/usr/bin/env bash
# Benchmark (issue 14): what the analyst gate adds to planning. The same
# statements are planned N times by a curator (no gate) and by an analyst
# (the gate's checks, partition selection, the bounding rewrite, listed
# keys), each in a plpgsql loop of dynamic SQL (planned every time);
# pg_stat_statements (track_planning) gives each one's mean planning time.
# Prints both and the difference. Not a test.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
PORT=${DPNOISE_BENCH_PORT:-54318}
DATA=${TMPDIR:-/tmp}/dpnoise-bench-planning
N=${N:-2000}
DB=dpnoise_bench_planning

bash "$REPO/scripts/setup.sh" >/dev/null
install_extension
start_server "$DATA" "$PORT"
if ! grep -q pg_stat_statements "$DATA/postgresql.conf"; then
  cat >>"$DATA/postgresql.conf" <<CONF
shared_preload_libraries = 'dpnoise, pg_stat_statements'
pg_stat_statements.track = all
pg_stat_statements.track_planning = on
CONF
  start_server "$DATA" "$PORT"
fi
trap 'stop_server "$DATA"' EXIT
psql_() { "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PORT" "$@"; }
psql_ -U postgres -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
psql_ -U postgres -d $DB <<SQL
CREATE EXTENSION dpnoise;
CREATE EXTENSION pg_stat_statements;
DO \$\$ BEGIN CREATE ROLE bench_planner LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END \$\$;
CREATE TABLE people (person_id bigint PRIMARY KEY, g int, x float8);
INSERT INTO people SELECT i, i % 100, i % 1000 FROM generate_series(1, 10000) i;
CREATE TABLE visits (person_id bigint, g int, x float8);
INSERT INTO visits SELECT i % 1000, (i * 7) % 100, i % 1000 FROM generate_series(1, 10000) i;
CREATE TABLE groups_listed (g int);
INSERT INTO groups_listed SELECT generate_series(0, 99);
VACUUM ANALYZE;
GRANT SELECT ON groups_listed TO bench_planner;
SELECT dp_protect('people', 'person_id'), dp_protect('visits', 'person_id', 10);
SELECT dp_analyst('bench_planner');
SELECT dp_budget_grant('bench_planner', 1e12, 1), dp_budget_grant('postgres', 1e12, 1);
SQL

queries=(
  "SELECT g, dp_count(1.0), dp_sum(x, 1.0, 0, 100) FROM people WHERE x > 10 GROUP BY g"
  "SELECT g, dp_count(1.0), dp_sum(x, 1.0, 0, 100) FROM visits WHERE x > 10 GROUP BY g"
  "SELECT l.g, dp_count(1.0), dp_sum(x, 1.0, 0, 100) FROM groups_listed l LEFT JOIN visits v ON v.g = l.g GROUP BY l.g"
)
labels=("one row per person (checks, selection)" "10 rows per person (bounding rewrite)" "listed keys (outer join, bounding)")
loop() {  # loop ROLE SQL: plans SQL N times (dynamic SQL in plpgsql is planned on every EXECUTE)
  psql_ -U "$1" -d $DB -c "DO \$\$ BEGIN FOR i IN 1..$N LOOP EXECUTE \$q\$$2\$q\$; END LOOP; END \$\$"
}
psql_ -U postgres -d $DB -c "SELECT pg_stat_statements_reset()" >/dev/null
for q in "${queries[@]}"; do
  loop postgres "$q"
  loop bench_planner "$q"
done
echo "planning time, mean of $N plans each (pg_stat_statements, track_planning)"
printf "%-42s %12s %12s %12s\n" "statement" "curator ms" "analyst ms" "gate adds ms"
for i in "${!queries[@]}"; do
  pattern=$(printf '%s' "${queries[$i]}" | sed "s/'/''/g; s/1\.0/\$%/g; s/[0-9][0-9]*/%/g")
  psql_ -U postgres -d $DB -At -F ' ' <<SQL | awk -v l="${labels[$i]}" '{printf "%-42s %12.4f %12.4f %12.4f\n", l, $1, $2, $2 - $1}'
SELECT max(mean_plan_time) FILTER (WHERE userid = 'postgres'::regrole),
       max(mean_plan_time) FILTER (WHERE userid = 'bench_planner'::regrole)
FROM pg_stat_statements WHERE query LIKE '$pattern' AND calls >= $N;
SQL
done
