#!/usr/bin/env bash
# Benchmark: dpnoise's functions against PostgreSQL's own on a 10M-row table,
# in one session, alternating, and prints times and ratios. Not a test.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
PORT=${DPNOISE_BENCH_PORT:-54317}
DATA=${TMPDIR:-/tmp}/dpnoise-bench
ROWS=${ROWS:-10000000}
RUNS=${RUNS:-7}

bash "$REPO/scripts/setup.sh" >/dev/null
install_extension
start_server "$DATA" "$PORT"
trap 'stop_server "$DATA"' EXIT
python3 "$REPO/bench/bench.py" --port "$PORT" --rows "$ROWS" --runs "$RUNS"
