#!/usr/bin/env bash
# What repeated releases cost and save: pgbench, 4 clients, a grouped
# release over a 30 000-row table. Prints statements per second for
#   plain     `SELECT region, count(*) … GROUP BY region` (PostgreSQL's own),
#   repeat    the dpnoise release over a tracked table, asked again (free),
#   charged   the same release over an untracked copy (charged every time),
# with the ratios; then the same repeat after 100 000 single-row write
# transactions have been logged (the write log read at each statement's
# start grows by one row per writing transaction).
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
PORT=${DPNOISE_BENCH_PORT:-54317}
DATA=${TMPDIR:-/tmp}/dpnoise-bench-repeat
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
WRITES=${WRITES:-100000}
DB=dpnoise_bench_repeat

bash "$REPO/scripts/setup.sh" >/dev/null
install_extension
start_server "$DATA" "$PORT"
dir=$(mktemp -d)
chmod 755 "$dir"
trap 'stop_server "$DATA"; rm -rf "$dir"' EXIT
psql_() { "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PORT" -U postgres "$@"; }
psql_ -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
psql_ -d $DB <<'SQL'
CREATE EXTENSION dpnoise;
CREATE TABLE staff (id int PRIMARY KEY, region text, salary float8);
INSERT INTO staff SELECT i, (ARRAY['north', 'south', 'east'])[1 + i % 3], i % 150000 FROM generate_series(1, 30000) i;
CREATE TABLE loose AS SELECT * FROM staff;
SELECT dp_track('staff');
SELECT dp_budget_grant('postgres', 1e12);
ANALYZE;
SQL
echo "SELECT region, count(*) FROM staff GROUP BY region;" >"$dir/plain.sql"
echo "SELECT region, dp_count(1.0) FROM staff GROUP BY region;" >"$dir/repeat.sql"
echo "SELECT region, dp_count(1.0) FROM loose GROUP BY region;" >"$dir/charged.sql"
echo "\\set id random(1, 30000)
UPDATE staff SET salary = salary WHERE id = :id;" >"$dir/write.sql"
chmod 644 "$dir"/*.sql

tps() { # script
  "$PG_BIN/pgbench" -n -h 127.0.0.1 -p "$PORT" -U postgres -c 4 -j 2 -T "$SECONDS_PER_RUN" -f "$dir/$1.sql" $DB 2>/dev/null |
    sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}
psql_ -d $DB -c "SELECT region, dp_count(1.0) FROM staff GROUP BY region" >/dev/null # paid once
plain=$(tps plain)
repeat=$(tps repeat)
charged=$(tps charged)
printf "%-34s %10s %10s\n" "statements per second (4 clients)" "tps" "/ plain"
printf "%-34s %10.0f %10.2f\n" "plain count(*) GROUP BY" "$plain" 1
printf "%-34s %10.0f %10.2f\n" "repeated release (tracked, free)" "$repeat" "$(echo "$repeat / $plain" | bc -l)"
printf "%-34s %10.0f %10.2f\n" "fresh release (untracked, charged)" "$charged" "$(echo "$charged / $plain" | bc -l)"
"$PG_BIN/pgbench" -n -h 127.0.0.1 -p "$PORT" -U postgres -c 4 -j 2 -t $((WRITES / 4)) -f "$dir/write.sql" $DB >/dev/null 2>&1
echo "write log: $(psql_ -d $DB -At -c "SELECT count(*) FROM dpnoise.writes") rows for staff"
start=$(date +%s.%N)
psql_ -d $DB -c "SELECT region, dp_count(1.0) FROM staff GROUP BY region" >/dev/null # paid once; asks for compaction
for _ in $(seq 1 600); do
  [ "$(psql_ -d $DB -At -c "SELECT count(*) FROM dpnoise.writes")" = 1 ] && break
  sleep 0.1
done
printf "compacted by the ledger worker into %s row(s) in %.1f s\n" \
  "$(psql_ -d $DB -At -c "SELECT count(*) FROM dpnoise.writes")" "$(echo "$(date +%s.%N) - $start" | bc -l)"
after=$(tps repeat)
printf "%-34s %10.0f %10.2f\n" "repeated release, after the writes" "$after" "$(echo "$after / $plain" | bc -l)"
echo "ledger rows: $(psql_ -d $DB -At -c 'SELECT count(*) FROM dpnoise.ledger')"
