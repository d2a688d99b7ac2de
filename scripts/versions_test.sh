#!/usr/bin/env bash
# The suites run on the PostgreSQL majors beside Debian's 15 (which
# scripts/test.sh tests in full): for each, dpnoise is built for it and
# installed into its installation (/opt/dpnoise-pg/<major>, unpacked by
# scripts/setup.sh, which nothing else uses), a server of its own is started,
# and the SQL regression suite, the catalog and upgrade check, the analyst
# end-to-end suite and the quickstart (run.sh, twice) run against it. A
# failing major fails the run.
#
# Usage: versions_test.sh [MAJOR ...]   (default: 16 18)
# Ports: DPNOISE_VERSIONS_PORT (default 54350) and the next two for the
# first major, the three after those for the second, and so on: no major
# starts a server on a port the one before it just stopped (CI once found
# 54352 still in use when 18's quickstart started after 16's).
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${DPNOISE_VERSIONS_PORT:-54350}
majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(16 18)

passed=0
index=0
for major in "${majors[@]}"; do
  (
    export PG=$major
    . scripts/lib.sh
    port=$((BASE + 3 * index))
    data=${TMPDIR:-/tmp}/dpnoise-test-pg$PG-$port
    echo "== PostgreSQL $PG: build and install into $("$PG_CONFIG" --bindir)/.."
    start=$SECONDS
    install_extension
    echo "   built and installed in $((SECONDS - start)) s"
    stop_server "$data"
    rm -rf "$data"
    start_server "$data" "$port"
    trap 'stop_server "$data"; rm -rf "$data"' EXIT
    echo "== PostgreSQL $PG: SQL regression suite (pg_regress)"
    regress_suite "$port"
    echo "== PostgreSQL $PG: catalog fingerprint and upgrade from every earlier version"
    bash scripts/upgrade_test.sh "$port"
    stop_server "$data"
    echo "== PostgreSQL $PG: analyst end to end"
    /usr/bin/python3 tests/e2e/analyst.py "$((port + 1))"
    echo "== PostgreSQL $PG: quickstart, scripts/run.sh twice"
    bash scripts/run_twice.sh "$((port + 2))"
  )
  passed=$((passed + 1))
  index=$((index + 1))
done
echo "versions: ${majors[*]} passed"
