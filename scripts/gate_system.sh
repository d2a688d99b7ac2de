#!/usr/bin/env bash
# Analyst-gate must-holds that need two sessions: a session that is already
# open sees a table protected, or losing its one-row-per-person index (it
# then bounds each person's rows), a lowered max_groups_contributed or an
# unprotected table (its prepared plans are made again) at its next
# statement (the gate's cache and cached plans are invalidated at the DBA's commit).
# Usage: gate_system.sh PORT (a server started by lib.sh's start_server,
# with dpnoise installed). Exits non-zero on failure.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
PORT=$1
DB=dpnoise_gate_system
psql_() { "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -At "$@"; }
fail() { echo "FAIL: $*"; exit 1; }

psql_ -U postgres -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
psql_ -U postgres -d $DB <<'SQL'
CREATE EXTENSION dpnoise;
DO $$ BEGIN CREATE ROLE gate_system_analyst LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
CREATE TABLE people (id int PRIMARY KEY, v float8);
INSERT INTO people SELECT i, i FROM generate_series(1, 100) i;
GRANT SELECT ON people TO gate_system_analyst;
-- 200 persons, each in groups 1 and 2; no SELECT for the analyst.
CREATE TABLE visits (id int, g int);
INSERT INTO visits SELECT i, g FROM generate_series(1, 200) i, generate_series(1, 2) g;
SELECT dp_protect('visits', 'id', 2);
SELECT dp_analyst('gate_system_analyst');
SELECT dp_budget_grant('gate_system_analyst', 100000, 1);
SQL

# One analyst session, kept open, fed statement by statement.
coproc ANALYST { "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PORT" -U gate_system_analyst -d $DB -At 2>&1; }
# Bash unsets ANALYST_PID once the coprocess exits: keep it while it runs.
analyst_pid=$ANALYST_PID
ask() {
  echo "$1" >&"${ANALYST[1]}"
  echo "SELECT 'end-of-answer';" >&"${ANALYST[1]}"
  local line out=""
  while IFS= read -r -t 20 line <&"${ANALYST[0]}"; do
    [ "$line" = end-of-answer ] && break
    out+="$line"$'\n'
  done
  printf '%s' "$out"
}

# max(id) reads a value: refused on a protected table (a plain count would
# be answered, as dp_count, under the table's policy: docs/bi.md).
[ "$(ask 'SELECT max(id) FROM people;')" = 100 ] || fail "an unprotected table is not read as privileges allow"
psql_ -U postgres -d $DB -c "SELECT dp_protect('people', 'id')" >/dev/null
out=$(ask 'SELECT max(id) FROM people;')
echo "$out" | grep -q "only differentially private aggregates" || fail "a table protected by another session is still read raw: $out"
out=$(ask 'SELECT dp_count(1.0) IS NOT NULL FROM people;')
[ "$out" = t ] || fail "an admitted query is refused: $out"
# Without its unique index each person now has two rows: the open session
# must bound per person (100 persons at epsilon 1000, whose count noise is
# almost surely 0), not count rows as its cache from before would (200).
psql_ -U postgres -d $DB -c "ALTER TABLE people DROP CONSTRAINT people_pkey" \
  -c "INSERT INTO people SELECT * FROM people" >/dev/null
out=$(ask 'SELECT dp_count(1000.0) FROM people;')
[ "$out" = 100 ] || fail "a table that lost its unique privacy unit is not bounded per person: $out"
psql_ -U postgres -d $DB -c "SELECT dp_unprotect('people')" >/dev/null
[ "$(ask 'SELECT count(*) FROM people;')" = 200 ] || fail "an unprotected table is not read again"
# A prepared statement's plan is made again after the DBA's change: a lower
# max_groups_contributed holds at once (200 persons in 1 group each, not
# the 400 person-groups of its old plan), and a table no longer protected
# needs the analyst's own SELECT privilege again.
ask 'SET plan_cache_mode = force_generic_plan;' >/dev/null
ask 'PREPARE by_group AS SELECT sum(c) FROM (SELECT g, dp_count(1000.0) AS c FROM visits GROUP BY g) s;' >/dev/null
out=$(ask 'EXECUTE by_group;')
[ "$out" = 400 ] || fail "the prepared statement does not count 2 groups a person: $out"
psql_ -U postgres -d $DB -c "SELECT dp_protect('visits', 'id', 1)" >/dev/null
out=$(ask 'EXECUTE by_group;')
[ "$out" = 200 ] || fail "a prepared plan keeps a max_groups_contributed the DBA lowered: $out"
psql_ -U postgres -d $DB -c "SELECT dp_unprotect('visits')" >/dev/null
out=$(ask 'EXECUTE by_group;')
echo "$out" | grep -q "permission denied" || fail "a prepared plan still vouches for a table no longer protected: $out"
echo '\q' >&"${ANALYST[1]}"
wait "$analyst_pid" 2>/dev/null || true
psql_ -U postgres -d postgres -c "DROP DATABASE $DB WITH (FORCE)"
echo "gate: an open analyst session sees protection, a lost unique index (bounded per person), unprotection, and a lowered max_groups_contributed (its prepared plans made again) at its next statement"
