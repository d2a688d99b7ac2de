#!/usr/bin/env bash
# Checks the SQL surface of every version, each catalog described by one
# fingerprint (tests/catalog/fingerprint.sql: every member of the extension
# with its definition's digest, volatility, privileges, state size, comment).
#
# - A fresh install of the current version must match the snapshot
#   tests/catalog/dpnoise.txt, and tests/catalog/versions/<current>.txt,
#   which holds the same lines under the version's name.
# - Only the first version's full script is shipped (sql/dpnoise--0.1.0.sql).
#   For any other earlier version V, CREATE EXTENSION dpnoise VERSION 'V'
#   runs it and then the upgrade scripts up to V. That catalog must equal
#   tests/catalog/versions/V.txt, the fingerprint V's own full script gave
#   when V was current (0.1.0 to 0.12.0 were taken from their frozen full
#   scripts before these were deleted). So the chain installs what that
#   release installed, and the next step starts from a real V.
# - ALTER EXTENSION dpnoise UPDATE from V must then give the catalog of a
#   fresh install of the current version.
# The earlier versions are those an installed upgrade script or a stored
# fingerprint names. Each must have a stored fingerprint, and none but the
# first may have an installed full script: CREATE EXTENSION would run it
# instead of the chain. The fingerprint does not see the indexes,
# constraints, triggers or column defaults of the extension's tables.
#
# The stored fingerprints are PostgreSQL 15's. On 16 to 18 the same catalog
# prints differently (views deparse otherwise, 17 adds MAINTAIN to ACLs):
# there the snapshots are not compared, and each earlier version must still
# install through the chain and update to the catalog of a fresh install
# made on the same server.
#
# DPNOISE_UPDATE_CATALOG=1 rewrites dpnoise.txt and versions/<current>.txt
# after a meant change of the surface. Once the version is bumped, the
# previous version's file is no longer rewritten: it is that release's.
#
# Needs a running server with dpnoise installed (lib.sh's start_server).
# Usage: upgrade_test.sh PORT
set -euo pipefail
shopt -s nullglob
PORT=$1
PSQL=(psql -X -q -h 127.0.0.1 -p "$PORT" -U postgres -v ON_ERROR_STOP=1)
# The PostgreSQL of lib.sh's PG (15, Debian's, by default).
. "$(dirname "$0")/lib.sh"
EXT="$("$PG_CONFIG" --sharedir)/extension"
CATALOG="$(cd "$(dirname "$0")/../tests/catalog" && pwd)"
current=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$EXT/dpnoise.control")
FINGERPRINT=$(cat "$CATALOG/fingerprint.sql")
lines() { echo "$1" | wc -l; }
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
if [ "${DPNOISE_UPDATE_CATALOG:-0}" = 1 ] && [ "$PG" = 15 ]; then
  echo "$fresh" >"$CATALOG/dpnoise.txt"
  echo "$fresh" >"$CATALOG/versions/$current.txt"
fi
snapshots=(dpnoise.txt "versions/$current.txt")
if [ "$PG" != 15 ]; then
  echo "catalog: PostgreSQL $PG: the stored fingerprints are 15's, not compared; each upgrade is compared with a fresh install here"
  snapshots=()
fi
for snapshot in "${snapshots[@]}"; do
  if [ ! -f "$CATALOG/$snapshot" ]; then
    echo "catalog: no tests/catalog/$snapshot (DPNOISE_UPDATE_CATALOG=1 writes it)"
    status=1
  elif [ "$fresh" = "$(cat "$CATALOG/$snapshot")" ]; then
    echo "catalog: a fresh install of $current matches tests/catalog/$snapshot ($(lines "$fresh") objects)"
  else
    echo "catalog: a fresh install of $current differs from tests/catalog/$snapshot (< snapshot, > fresh):"
    diff "$CATALOG/$snapshot" <(echo "$fresh") || true
    status=1
  fi
done
# Every version an upgrade script or a stored fingerprint names, oldest first.
versions=$(
  for f in "$EXT"/dpnoise--*--*.sql; do
    basename "$f" .sql | sed 's/^dpnoise--//; s/--/\n/'
  done
  for f in "$CATALOG"/versions/*.txt; do basename "$f" .txt; done
)
versions=$(echo "$versions" | sort -uV)
first=$(echo "$versions" | head -1)
for v in $versions; do
  [ "$v" != "$current" ] || continue
  if [ "$v" != "$first" ] && [ -f "$EXT/dpnoise--$v.sql" ]; then
    echo "version $v: $EXT/dpnoise--$v.sql is installed, so CREATE EXTENSION runs it, not the chain from $first (install_extension removes it)"
    status=1
  fi
  "${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS dpnoise_upgraded" -c "CREATE DATABASE dpnoise_upgraded"
  if ! "${PSQL[@]}" -d dpnoise_upgraded -c "CREATE EXTENSION dpnoise VERSION '$v'"; then
    echo "version $v: CREATE EXTENSION dpnoise VERSION '$v' failed"
    status=1
    continue
  fi
  if [ "$v" = "$first" ] || [ -f "$EXT/dpnoise--$v.sql" ]; then
    how="installed by its full script"
  else
    n=$("${PSQL[@]}" -At -d dpnoise_upgraded -c "SELECT array_length(string_to_array(path, '--'), 1) - 1
      FROM pg_extension_update_paths('dpnoise') WHERE source = '$first' AND target = '$v'")
    how="installed from $first through $n upgrade script$([ "$n" = 1 ] || echo s)"
  fi
  installed=$("${PSQL[@]}" -At -d dpnoise_upgraded -c "$FINGERPRINT")
  stored="$CATALOG/versions/$v.txt"
  if [ "$PG" != 15 ]; then
    chain="$how ($(lines "$installed") objects)"
  elif [ ! -f "$stored" ]; then
    chain="$how, has no tests/catalog/versions/$v.txt to compare with"
    status=1
  elif [ "$installed" = "$(cat "$stored")" ]; then
    chain="$how, is $v's released catalog ($(lines "$installed") objects)"
  else
    chain="$how, differs from $v's released catalog"
    echo "version $v: the chained install differs from tests/catalog/versions/$v.txt (< released, > chained):"
    diff "$stored" <(echo "$installed") || true
    status=1
  fi
  if ! "${PSQL[@]}" -d dpnoise_upgraded -c "ALTER EXTENSION dpnoise UPDATE"; then
    echo "version $v: $chain; ALTER EXTENSION dpnoise UPDATE failed"
    status=1
    continue
  fi
  upgraded=$("${PSQL[@]}" -At -d dpnoise_upgraded -c "$FINGERPRINT")
  if [ "$fresh" = "$upgraded" ]; then
    echo "version $v: $chain; updated to $current gives the fresh catalog ($(lines "$fresh") objects)"
  else
    echo "version $v: $chain; updated to $current differs from a fresh install (< fresh, > updated):"
    diff <(echo "$fresh") <(echo "$upgraded") || true
    status=1
  fi
done
"${PSQL[@]}" -d postgres -c "DROP DATABASE dpnoise_fresh" -c "DROP DATABASE IF EXISTS dpnoise_upgraded"
exit $status
