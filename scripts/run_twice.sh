#!/usr/bin/env bash
# The quickstart runs again and again: scripts/run.sh twice for $PG, on a
# server of its own, each run showing the demo, and the second keeping the
# charges of the first in its ledger. Run after dpnoise was built and
# installed for $PG (test.sh, versions_test.sh): run.sh then rebuilds nothing.
#
# Usage: run_twice.sh PORT [DATADIR]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
port=$1
data=${2:-${TMPDIR:-/tmp}/dpnoise-run-twice-pg$PG-$port}
stop_server "$data"
rm -rf "$data"
trap 'stop_server "$data"; rm -rf "$data"' EXIT
ledger() {
  psql -X -h 127.0.0.1 -p "$port" -U postgres -d dpnoise_demo -tAc "SELECT count(*) FROM dpnoise.ledger"
}
before=0
for run in 1 2; do
  start=$SECONDS
  if ! out=$(DPNOISE_PORT=$port DPNOISE_DATA=$data bash "$REPO/scripts/run.sh" 2>&1); then
    echo "$out"
    echo "run_twice: run $run of scripts/run.sh failed (PostgreSQL $PG)" >&2
    exit 1
  fi
  for shown in noisy_count noisy_salary "The server keeps running"; do
    if ! grep -q "$shown" <<<"$out"; then
      echo "$out"
      echo "run_twice: run $run did not show '$shown'" >&2
      exit 1
    fi
  done
  after=$(ledger)
  if [ "$after" -le "$before" ]; then
    echo "run_twice: run $run left $after ledger rows, the run before $before" >&2
    exit 1
  fi
  echo "   run $run: the demo shown in $((SECONDS - start)) s, $after ledger rows"
  before=$after
done
