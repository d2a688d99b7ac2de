#!/usr/bin/env bash
# Runs every test: the core crate's statistical tests, the backend tests
# (cargo pgrx test, as the postgres user), the SQL regression suite, the
# docs' SQL examples and the system tests, on PostgreSQL 15 (Debian's); then
# the SQL regression suite, the upgrade test and the analyst end-to-end
# suite on PostgreSQL 16 and 18 (scripts/versions_test.sh).
# Installs what is missing first. Exits non-zero on any failure.
set -euo pipefail
# The full suites are 15's (Debian's); versions_test.sh sets its own PG.
export PG=15
. "$(dirname "$0")/lib.sh"
PORT=${DPNOISE_TEST_PORT:-54316}
# Outside the checkout: the postgres user must reach it wherever CI clones.
DATA=${TMPDIR:-/tmp}/dpnoise-test-$PORT
PGRX_DATA=${TMPDIR:-/tmp}/dpnoise-pgrx
cd "$REPO"

bash scripts/setup.sh

echo "== lint: unsafe code documented (clippy, # Safety sections)"
bash scripts/lint.sh

echo "== core: cargo test --release -p dpnoise-core"
cargo test --release -p dpnoise-core

echo "== backend: cargo pgrx test pg15"
# pgrx's test server runs as postgres and makes its data directory inside this one.
rm -rf "$PGRX_DATA"
mkdir -p "$PGRX_DATA"
chown postgres:postgres "$PGRX_DATA"
# cargo pgrx test rewrites dpnoise.so in place: detach running servers' copy first.
detach_library
cargo pgrx test pg15 --runas postgres --pgdata "$PGRX_DATA"
rm -rf "$PGRX_DATA"

echo "== SQL regression suite (pg_regress)"
install_extension
rm -rf "$DATA"
start_server "$DATA" "$PORT"
trap 'stop_server "$DATA"' EXIT
regress_suite "$PORT"
echo "== quickstart: scripts/run.sh twice, the demo shown each time"
bash scripts/run_twice.sh "$((PORT + 18))"
echo "== docs: the SQL examples of README.md and docs/*.md"
bash scripts/docs_test.sh "$PORT"
echo "== reinstall under a running server"
bash scripts/reinstall_test.sh "$DATA" "$PORT"
echo "== upgrade from every earlier version"
bash scripts/upgrade_test.sh "$PORT"
echo "== ledger: standby and missing preload"
bash scripts/ledger_system.sh "$DATA" "$PORT"
echo "== budget: crashes and concurrency"
bash scripts/budget_system.sh "$DATA" "$PORT"
echo "== analyst gate: two sessions"
bash scripts/gate_system.sh "$PORT"
echo "== session caps: the boundary, no way to raise them, sessions apart, concurrency"
/usr/bin/python3 tests/e2e/session.py "$PORT"
echo "== prepared statements follow the settings that shape an analyst's query"
/usr/bin/python3 tests/e2e/prepared.py "$PORT"
echo "== repeated releases: identical and free, new after a write, fresh when unidentifiable"
/usr/bin/python3 tests/e2e/repeat.py "$PORT"
echo "== BI tools: Superset's, Metabase's and Grafana's plain SQL replayed as an analyst under a privacy policy"
/usr/bin/python3 tests/e2e/bi.py "$PORT"
echo "== analyst end to end: psycopg (BI shapes), DP audit of admitted SQL, amplification attacks"
/usr/bin/python3 tests/e2e/analyst.py "$((PORT + 15))"
echo "== thirty analyst questions: each answered within its noise or refused (ZB003) before any charge"
/usr/bin/python3 tests/e2e/questions.py "$((PORT + 17))"
echo "== fuzzer: 10 000 seeded analyst statements, no internal error, no charge for a refusal"
/usr/bin/python3 tests/e2e/fuzz.py "$((PORT + 19))"
# A seed that once found a thresholded count's selection reading nothing
# (src/release.rs): its first 265 statements, replayed every run.
/usr/bin/python3 tests/e2e/fuzz.py "$((PORT + 19))" 265 597683580
echo "== plan walk: admitted queries and probes under all 64 forced plans, as an analyst"
/usr/bin/python3 tests/e2e/plans.py "$((PORT + 16))"
echo "== Citus: coordinator and two workers (builds Citus the first time)"
stop_server "$DATA"
bash scripts/citus.sh
echo "== PostgreSQL 16 and 18: SQL regression suite, upgrades, analyst end to end"
bash scripts/versions_test.sh 16 18
echo "suites: 19 passed, 0 failed"
