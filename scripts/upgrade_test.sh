#!/usr/bin/env bash
# A fresh install's catalog must match the snapshot in tests/catalog, and
# ALTER EXTENSION dpnoise UPDATE from every earlier version must give the
# catalog a fresh install of the current version gives: the same objects,
# definitions, volatility, privileges and comments. Needs a running server
# with dpnoise installed (lib.sh's start_server). Usage: upgrade_test.sh PORT
set -euo pipefail
PORT=$1
PSQL=(psql -X -q -h 127.0.0.1 -p "$PORT" -U postgres -v ON_ERROR_STOP=1)
current=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$(/usr/lib/postgresql/15/bin/pg_config --sharedir)/extension/dpnoise.control")
# Every member of the extension, described by what a user or the planner sees.
FINGERPRINT=$(cat "$(dirname "$0")/../tests/catalog/fingerprint.sql")
"${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS dpnoise_fresh" -c "DROP DATABASE IF EXISTS dpnoise_upgraded"
"${PSQL[@]}" -d postgres -c "CREATE DATABASE dpnoise_fresh" -c "CREATE DATABASE dpnoise_upgraded"
# In a database without dpnoise, DROP EXTENSION IF EXISTS must pass the
# ledger guard (which once queried a table that is not there).
"${PSQL[@]}" -d dpnoise_fresh -c "DROP EXTENSION IF EXISTS dpnoise"
"${PSQL[@]}" -d dpnoise_fresh -c "CREATE EXTENSION dpnoise"
fresh=$("${PSQL[@]}" -At -d dpnoise_fresh -c "$FINGERPRINT")
status=0
# The SQL surface is pinned: a change to it (a function's volatility, its
# privileges, an aggregate's state size) shows here and must be meant.
# DPNOISE_UPDATE_CATALOG=1 rewrites the snapshot after such a change.
SNAPSHOT="$(dirname "$0")/../tests/catalog/dpnoise.txt"
if [ "${DPNOISE_UPDATE_CATALOG:-0}" = 1 ]; then
  echo "$fresh" >"$SNAPSHOT"
fi
if [ "$fresh" = "$(cat "$SNAPSHOT")" ]; then
  echo "catalog: a fresh install matches tests/catalog/dpnoise.txt ($(echo "$fresh" | wc -l) objects)"
else
  echo "catalog: a fresh install differs from tests/catalog/dpnoise.txt (< snapshot, > fresh):"
  diff "$SNAPSHOT" <(echo "$fresh") || true
  status=1
fi
for script in "$(/usr/lib/postgresql/15/bin/pg_config --sharedir)"/extension/dpnoise--*.sql; do
  from=$(basename "$script" .sql | sed -n 's/^dpnoise--\([^-]*\)$/\1/p')
  [ -n "$from" ] && [ "$from" != "$current" ] || continue
  "${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS dpnoise_upgraded" -c "CREATE DATABASE dpnoise_upgraded"
  "${PSQL[@]}" -d dpnoise_upgraded -c "CREATE EXTENSION dpnoise VERSION '$from'" -c "ALTER EXTENSION dpnoise UPDATE"
  upgraded=$("${PSQL[@]}" -At -d dpnoise_upgraded -c "$FINGERPRINT")
  if [ "$fresh" = "$upgraded" ]; then
    echo "upgrade: $from -> $current gives the fresh catalog ($(echo "$fresh" | wc -l) objects)"
  else
    echo "upgrade: $from -> $current differs from a fresh install:"
    diff <(echo "$fresh") <(echo "$upgraded") || true
    status=1
  fi
done
"${PSQL[@]}" -d postgres -c "DROP DATABASE dpnoise_fresh" -c "DROP DATABASE IF EXISTS dpnoise_upgraded"
exit $status
