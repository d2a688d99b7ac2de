#!/usr/bin/env bash
# Runs the ```sql blocks of README.md and docs/*.md against a running server
# and compares their output with tests/docs/expected, so the docs cannot rot;
# refuses SQL indented as code, which would never run.
# Usage: scripts/docs_test.sh PORT
#        DPNOISE_UPDATE_DOCS=1 scripts/docs_test.sh PORT   (rewrites expected)
#
# One pg_regress test per markdown file (README.md: readme, docs/X.md: X):
# tests/docs/setup.sql, then the file's blocks in order, with dpnoise.seed
# set so the noise is the same on every run. The info string of a block
# may carry words after `sql`:
#   norun       not run: only for a block that needs another server (Citus);
#               each is listed when the test runs
#   role=NAME   run in a new connection as NAME (an analyst must log in),
#               then back to postgres
#   noseed      run without the seed (repeated releases are off under it)
#   quiet       its results are not compared (random ones); errors still are
# For a test server: it drops and recreates the roles the docs use (alice,
# bob, bi_service) and the database dpnoise_docs.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
PORT=${1:?usage: docs_test.sh PORT}
# Fixed in the preamble and for every later connection to the database:
# an analyst cannot SET it (superusers only), so the database carries it.
SEED=20260501
DB=dpnoise_docs
cd "$REPO"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/in/sql" "$WORK/in/expected" "$WORK/out"
chmod -R 777 "$WORK"

# extract FILE: the file's runnable blocks as psql input, on stdout.
extract() {
  awk -v seed="$SEED" -v db="$DB" '
    /^```/ {
      if (!inblock) {
        n = split(substr($0, 4), w, /[ \t]+/)
        if (w[1] != "sql") { skip = 1; inblock = 1; next }
        skip = 0; role = ""; noseed = 0; quiet = 0
        for (i = 2; i <= n; i++) {
          if (w[i] == "norun") skip = 1
          else if (w[i] ~ /^role=/) role = substr(w[i], 6)
          else if (w[i] == "noseed") noseed = 1
          else if (w[i] == "quiet") quiet = 1
          else if (w[i] != "") { print "docs_test: unknown word " w[i] " in " FILENAME ":" NR > "/dev/stderr"; exit 2 }
        }
        inblock = 1
        if (!skip) {
          # An analyst cannot SET the seed: its new connection reads the
          # setting of the database, cleared for the block.
          if (noseed && role != "") print "ALTER DATABASE " db " SET dpnoise.seed = '\'''\'';"
          if (role != "") print "\\c - " role
          if (noseed && role == "") print "SET dpnoise.seed = '\'''\'';"
          if (quiet) print "\\o /dev/null"
        }
        next
      }
      inblock = 0
      if (!skip) {
        if (quiet) print "\\o"
        if (noseed && role == "") print "SET dpnoise.seed = '\''" seed "'\'';"
        if (role != "") print "\\c - postgres"
        if (noseed && role != "") print "ALTER DATABASE " db " SET dpnoise.seed = '\''" seed "'\'';"
      }
      next
    }
    inblock && !skip { print }
  ' "$1"
}

# An SQL example indented as code (four spaces) never runs, so it can rot
# unseen (issue 49: the total forms' examples read columns the page's
# tables lack): every SQL example is a fenced block, `norun` and a reason
# where it needs another server.
indented=$(awk '
  /^```/ { fenced = !fenced; next }
  !fenced && /^    (SELECT|WITH|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|GRANT|SET|CALL|EXPLAIN) / {
    print FILENAME ":" FNR ": " $0
  }' README.md docs/*.md)
if [ -n "$indented" ]; then
  echo "docs_test: SQL indented as code does not run; fence it as a \`\`\`sql block:" >&2
  echo "$indented" >&2
  exit 1
fi
# The blocks that do not run, listed (none but those needing another server).
norun=$(grep -n '^```sql.*norun' README.md docs/*.md || true)
echo "docs_test: blocks not run: ${norun:-none}"

tests=()
for md in README.md docs/*.md; do
  name=$(basename "$md" .md | tr 'A-Z' 'a-z')
  body=$(extract "$md")
  [ -n "$body" ] || continue
  {
    # The preamble prints nothing unless it fails.
    echo "-- The preamble, tests/docs/setup.sql, runs unechoed."
    echo '\set ECHO none'
    echo '\o /dev/null'
    cat tests/docs/setup.sql
    # The roles the docs use, unless this file creates them itself.
    for role in alice bob bi_service; do
      grep -qi "CREATE ROLE $role\b" <<<"$body" || echo "CREATE ROLE $role LOGIN;"
    done
    echo "ALTER DATABASE $DB SET dpnoise.seed = '$SEED';"
    echo "SET dpnoise.seed = '$SEED';"
    echo '\o'
    echo '\set ECHO all'
    echo "$body"
  } >"$WORK/in/sql/$name.sql"
  if [ -f "tests/docs/expected/$name.out" ]; then
    cp "tests/docs/expected/$name.out" "$WORK/in/expected/"
  else
    : >"$WORK/in/expected/$name.out"
  fi
  tests+=("$name")
done

status=0
"$(dirname "$("$PG_CONFIG" --pgxs)")/../test/regress/pg_regress" \
  --host=127.0.0.1 --port="$PORT" --user=postgres --dbname="$DB" \
  --inputdir="$WORK/in" --outputdir="$WORK/out" "${tests[@]}" || status=$?

if [ "${DPNOISE_UPDATE_DOCS:-}" = 1 ]; then
  for name in "${tests[@]}"; do
    cp "$WORK/out/results/$name.out" "tests/docs/expected/$name.out"
  done
  echo "docs_test: rewrote tests/docs/expected (${tests[*]}); review the diff"
  status=0
fi
if [ $status -ne 0 ]; then
  cat "$WORK/out/regression.diffs" 2>/dev/null || true
  echo "docs_test: the docs' examples changed output; if that is intended:" >&2
  echo "  DPNOISE_UPDATE_DOCS=1 bash scripts/docs_test.sh PORT" >&2
  exit $status
fi
# The roles are the server's, not the database's: later suites on this
# server must not meet an analyst called alice.
"$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PORT" -U postgres -d postgres \
  -c "DROP DATABASE $DB WITH (FORCE)" -c "DROP ROLE IF EXISTS alice, bob, bi_service"
