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
PSQL=(psql -X -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1)
"${PSQL[@]}" -q <<'SQL'
DROP EXTENSION IF EXISTS dpnoise CASCADE;
CREATE EXTENSION dpnoise;
DROP TABLE IF EXISTS staff;
CREATE TABLE staff AS
SELECT i AS id,
       (ARRAY['north', 'south', 'east', 'west'])[1 + i % 4] AS region,
       round((30000 + 40000 * ((i * 7919) % 1000) / 1000.0)::numeric, 2)::float8 AS salary
FROM generate_series(1, 10000) AS i;
-- Every release is charged: give the demo's role a budget.
SELECT dp_budget_grant('postgres', 100);
SQL
echo
echo "Exact answers next to dpnoise's (epsilon = 1 per aggregate, charged to postgres's budget of 100):"
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
echo "  psql -h 127.0.0.1 -p $PORT -U postgres postgres"
echo "Stop it with: runuser -u postgres -- $PG_BIN/pg_ctl -D $DATA stop"
