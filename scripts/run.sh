#!/usr/bin/env bash
# Quickstart: install what is missing, build and install dpnoise, start a local
# server, and show exact answers next to dpnoise's noisy ones.
# PG=16 or PG=18 runs it on that PostgreSQL (scripts/setup.sh unpacks them);
# the default is Debian's 15.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
PORT=${DPNOISE_PORT:-$((54315 + (PG - 15) * 100))}
DATA=${DPNOISE_DATA:-/var/tmp/dpnoise-run$([ "$PG" = 15 ] || echo "-pg$PG")}

bash "$REPO/scripts/setup.sh"
echo "run: building and installing dpnoise (release) for PostgreSQL $PG"
install_extension
start_server "$DATA" "$PORT"
# The demo's own database, made on the first run and kept on the next: its
# ledger holds every charge made so far, and dpnoise drops no ledger that
# holds charges (docs/budget.md).
DB=dpnoise_demo
PSQL=(psql -X -h 127.0.0.1 -p "$PORT" -U postgres -v ON_ERROR_STOP=1)
if [ -z "$("${PSQL[@]}" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'")" ]; then
  "${PSQL[@]}" -d postgres -qc "CREATE DATABASE $DB"
fi
PSQL+=(-d "$DB")
"${PSQL[@]}" -q -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dpnoise;
-- A run after a newer dpnoise was built: its update scripts.
ALTER EXTENSION dpnoise UPDATE;
DROP TABLE IF EXISTS staff;
CREATE TABLE staff AS
SELECT i AS id,
       (ARRAY['north', 'south', 'east', 'west'])[1 + i % 4] AS region,
       round((30000 + 40000 * ((i * 7919) % 1000) / 1000.0)::numeric, 2)::float8 AS salary
FROM generate_series(1, 10000) AS i;
-- Every release is charged: the demo's role gets a budget, topped up to
-- 100 on each run (what earlier runs spent stays in the ledger).
SELECT dp_budget_grant('postgres', 100 - epsilon) FROM dp_budget_remaining() WHERE epsilon < 100;
SQL
echo
echo "Exact answers next to dpnoise's in database $DB (epsilon = 1 per aggregate, charged to postgres's budget of 100):"
"${PSQL[@]}" <<'SQL'
SELECT region,
       count(*)                                      AS exact_count,
       dp_count(1.0)                                 AS noisy_count,
       round(sum(salary)::numeric, 2)                AS exact_sum,
       round(dp_sum_laplace(salary, 1.0, 0, 100000)::numeric, 2) AS noisy_sum
FROM staff GROUP BY region ORDER BY region;
SELECT salary AS exact_salary, dp_laplace(salary, 1.0, 1000) AS noisy_salary
FROM staff ORDER BY id LIMIT 3;
SELECT * FROM dp_budget_remaining();
SQL
echo
echo "The server keeps running. Connect with:"
echo "  psql -h 127.0.0.1 -p $PORT -U postgres $DB"
echo "Stop it with: runuser -u postgres -- $PG_BIN/pg_ctl -D $DATA stop"
