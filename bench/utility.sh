#!/usr/bin/env bash
# Utility against PipelineDP (issue 39): builds and installs dpnoise, starts
# a server of its own and runs bench/utility.py, which installs PipelineDP
# into a virtual environment ($TMPDIR/dpnoise-utility-venv) the first time.
# Prints groups kept and RMSE per query, mechanism and k. Not a test.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
PORT=${DPNOISE_BENCH_PORT:-54321}
DATA=${TMPDIR:-/tmp}/dpnoise-bench-utility

bash "$REPO/scripts/setup.sh" >/dev/null
install_extension
start_server "$DATA" "$PORT"
trap 'stop_server "$DATA"' EXIT
python3 "$REPO/bench/utility.py" --port "$PORT" "$@"
