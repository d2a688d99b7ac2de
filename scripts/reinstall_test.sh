#!/usr/bin/env bash
# Reinstalling dpnoise under a running server that is executing releases
# must not crash it: install_extension renames new files over the old ones,
# so backends that have dpnoise.so mapped keep the old file. Rewriting the
# library in place (as `cargo pgrx install` does) crashed every backend.
# Usage: reinstall_test.sh DATADIR PORT (a server started by lib.sh, after
# install_extension, which staged the package this test installs again).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
DATA=$1
PORT=$2
PSQL=(psql -X -q -At -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1)
"${PSQL[@]}" -c "CREATE EXTENSION IF NOT EXISTS dpnoise" -c "SELECT dp_budget_grant('postgres', 1000)" >/dev/null
log_lines=$(wc -l <"$DATA/server.log")
# About ten seconds of per-row releases in two sessions while the files are replaced.
for s in 1 2; do
  "${PSQL[@]}" -c "SELECT count(dp_laplace(i, 1.0, 1.0)) FROM generate_series(1, 60000000) i" >"$DATA/reinstall.$s" 2>&1 &
done
sleep 1
# Another library (here the first page of this one: any other contents
# would do) and the release one, placed by turns as install_extension
# places files. Rewritten in place, a mapped library whose pages change or
# vanish kills the backends running it; renamed over, it is not touched.
lib=$("$PG_CONFIG" --pkglibdir)/dpnoise.so
staged="$REPO/target/release/dpnoise-pg15$lib"
other=$(mktemp)
head -c 4096 "$staged" >"$other"
# First, while the servers still map the installed file: a tool that
# rewrites the library in place (cargo pgrx test) is safe once
# detach_library has given the file a fresh inode.
detach_library
cat "$other" >"$lib"
sleep 0.2
cat "$staged" >"$lib"
for _ in $(seq 15); do
  place_file "$other" "$lib"
  sleep 0.1
  place_file "$staged" "$lib"
  sleep 0.1
done
rm -f "$other"
status=0
for job in $(jobs -p); do wait "$job" || status=1; done
crashes=$(tail -n +"$((log_lines + 1))" "$DATA/server.log" | grep -c "terminated by signal" || true)
if [ $status -ne 0 ] || [ "$crashes" -ne 0 ]; then
  echo "reinstall: FAILED (sessions exit $status, $crashes backends killed by a signal)"
  cat "$DATA"/reinstall.*
  exit 1
fi
echo "reinstall: 30 installs of dpnoise.so, and one in place after detach_library, under $(($(cat "$DATA"/reinstall.1) + $(cat "$DATA"/reinstall.2))) running releases, no crash"
