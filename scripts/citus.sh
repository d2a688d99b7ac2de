#!/usr/bin/env bash
# dpnoise on a Citus cluster: a coordinator and two workers on loopback, run
# as the postgres user. Builds Citus 13.2.2 from ../shared/vendor the first
# time (about 5 minutes; no registry here carries it).
#
#   scripts/citus.sh            build if needed, start, run the suite, stop
#   scripts/citus.sh demo       start, then the exact-vs-noisy table of run.sh, on the cluster
#   scripts/citus.sh start|stop the cluster alone (ports 54340-54342)
#   scripts/citus.sh bench [ROWS]   bench/citus.py: dp_count/dp_sum against count/sum
set -euo pipefail
. "$(dirname "$0")/lib.sh"

CITUS_VERSION=13.2.2
# ../shared/vendor beside the checkout (a clone elsewhere finds /work/shared).
if [ -z "${CITUS_TARBALL:-}" ]; then
  for CITUS_TARBALL in "$REPO/../shared/vendor/citus-$CITUS_VERSION.tar.gz" "/work/shared/vendor/citus-$CITUS_VERSION.tar.gz"; do
    [ -f "$CITUS_TARBALL" ] && break
  done
fi
CITUS_BUILD=${CITUS_BUILD:-${TMPDIR:-/tmp}/dpnoise-citus-build}
PORT=${DPNOISE_CITUS_PORT:-54340}
NODES=("$PORT" "$((PORT + 1))" "$((PORT + 2))")
ROOT=${TMPDIR:-/tmp}/dpnoise-citus-$PORT
DB=dpnoise_citus

installed_citus() {
  [ -f "$("$PG_CONFIG" --pkglibdir)/citus.so" ] &&
    grep -qs "default_version = '${CITUS_VERSION%.*}" "$("$PG_CONFIG" --sharedir)/extension/citus.control"
}

build_citus() {
  if installed_citus; then
    return
  fi
  echo "citus: building Citus $CITUS_VERSION from $CITUS_TARBALL (about 5 minutes)"
  local pkgs=() p
  for p in libkrb5-dev liblz4-dev libzstd-dev libcurl4-openssl-dev libselinux1-dev libxslt1-dev libpam0g-dev libreadline-dev; do
    dpkg -s "$p" >/dev/null 2>&1 || pkgs+=("$p")
  done
  if [ ${#pkgs[@]} -gt 0 ]; then
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/dev/null
  fi
  rm -rf "$CITUS_BUILD"
  mkdir -p "$CITUS_BUILD"
  tar xzf "$CITUS_TARBALL" -C "$CITUS_BUILD"
  # PostgreSQL 15.20 exports have_createdb_privilege(), which Citus also
  # defines as static inline for PostgreSQL < 16: drop Citus's copy.
  perl -0pi -e 's/static inline bool\nhave_createdb_privilege\(void\)\n\{.*?\n\}\n//s' \
    "$CITUS_BUILD/src/include/pg_version_compat.h"
  (cd "$CITUS_BUILD" && PG_CONFIG="$PG_CONFIG" ./configure --without-libcurl >configure.log 2>&1 &&
    make -j"$(nproc)" >make.log 2>&1 && make install >install.log 2>&1) || {
    tail -30 "$CITUS_BUILD/make.log" 2>/dev/null; echo "citus: build failed" >&2; return 1; }
  installed_citus || { echo "citus: not installed after the build" >&2; return 1; }
}

psql_node() { local port=$1; shift; as_postgres "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" "$@"; }

start_cluster() {
  local port dir fresh=0
  for port in "${NODES[@]}"; do
    dir=$ROOT/$port
    if [ ! -f "$dir/PG_VERSION" ]; then
      fresh=1
      mkdir -p "$dir"
      chown -R postgres:postgres "$ROOT"
      chmod 700 "$dir"
      as_postgres "$PG_BIN/initdb" -D "$dir" --auth=trust -U postgres >/dev/null
      cat >>"$dir/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
shared_preload_libraries = 'citus,dpnoise'
max_connections = 200
citus.log_remote_commands = off
CONF
    fi
    stop_server "$dir"
    as_postgres "$PG_BIN/pg_ctl" -D "$dir" -l "$dir/server.log" -w start >/dev/null || { tail -20 "$dir/server.log"; return 1; }
  done
  if [ $fresh = 1 ]; then
    # Both extensions on every node before the workers join: Citus refuses
    # DDL on workers afterwards.
    for port in "${NODES[@]}"; do
      psql_node "$port" -d postgres -c "CREATE DATABASE $DB"
      psql_node "$port" -d "$DB" -c "CREATE EXTENSION citus" -c "CREATE EXTENSION dpnoise"
    done
    psql_node "$PORT" -d "$DB" -c "SELECT citus_set_coordinator_host('127.0.0.1', $PORT)" >/dev/null
    for port in "${NODES[@]:1}"; do
      psql_node "$PORT" -d "$DB" -c "SELECT citus_add_node('127.0.0.1', $port)" >/dev/null
    done
  fi
  echo "citus: coordinator on $PORT, workers on ${NODES[1]} and ${NODES[2]} (database $DB)"
}

stop_cluster() {
  local port
  for port in "${NODES[@]}"; do stop_server "$ROOT/$port"; done
}

case "${1:-all}" in
  build) build_citus ;;
  start) build_citus; install_extension; rm -rf "$ROOT"; start_cluster ;;
  stop) stop_cluster ;;
  demo)
    build_citus; install_extension; start_cluster
    /usr/bin/python3 "$REPO/tests/citus/suite.py" demo "${NODES[@]}" ;;
  bench)
    build_citus; install_extension; start_cluster
    /usr/bin/python3 "$REPO/bench/citus.py" "${2:-10000000}" "${NODES[@]}" ;;
  all)
    build_citus
    install_extension
    stop_cluster
    rm -rf "$ROOT"
    start_cluster
    trap stop_cluster EXIT
    /usr/bin/python3 "$REPO/tests/citus/suite.py" test "${NODES[@]}" ;;
  *) echo "usage: $0 [build|start|stop|demo|bench [ROWS]]" >&2; exit 2 ;;
esac
