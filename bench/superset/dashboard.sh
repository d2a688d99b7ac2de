#!/usr/bin/env bash
# A Superset 6.1.0 dashboard over dpnoise, end to end, run by hand (not in CI):
# a throwaway PostgreSQL 15 on 127.0.0.1:54390 with demo data protected by
# dp_protect/dp_policy/dp_domain, Superset on 127.0.0.1:8088 as the analyst
# bi_analyst, four charts and a dashboard made through Superset's REST API,
# the dashboard loaded and reloaded in headless Chromium (screenshots in
# docs/img/), and the epsilon each load cost, read from dpnoise.ledger.
#
# Usage (as root, dpnoise installed into the system PostgreSQL 15):
#   bash bench/superset/dashboard.sh
# Environment: SUPERSET_VENV (default /tmp/superset-venv, reused if present),
#   KEEP_WORK=1 keeps the temporary directory (server log, Superset log).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PGBIN=/usr/lib/postgresql/15/bin
PGPORT=54390
SSPORT=8088
VENV="${SUPERSET_VENV:-/tmp/superset-venv}"
IMG="$REPO/docs/img"

WORK="$(mktemp -d /tmp/dpnoise-superset.XXXXXX)"
chmod 755 "$WORK"
PGDATA="$WORK/pg"
PGLOG="$WORK/postgres.log"
SSLOG="$WORK/superset.log"
SSPID=""

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

cleanup() {
    local rc=$?
    if [[ -n "$SSPID" ]] && kill -0 "$SSPID" 2>/dev/null; then
        log "stopping Superset (pid $SSPID)"
        kill "$SSPID" 2>/dev/null || true
        for _ in $(seq 1 20); do kill -0 "$SSPID" 2>/dev/null || break; sleep 0.5; done
        kill -9 "$SSPID" 2>/dev/null || true
    fi
    if [[ -f "$PGDATA/postmaster.pid" ]]; then
        log "stopping PostgreSQL on port $PGPORT"
        runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDATA" -m fast -w stop >/dev/null 2>&1 || true
    fi
    if [[ "${KEEP_WORK:-0}" == 1 || $rc -ne 0 ]]; then
        log "kept $WORK (postgres.log, superset.log)"
    else
        rm -rf "$WORK"
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in $PGPORT $SSPORT; do
    if port_busy "$p"; then log "port $p is in use: stop what holds it first"; exit 1; fi
done

# ------------------------------------------------------------ PostgreSQL
log "initdb into $PGDATA"
chown postgres:postgres "$WORK"
runuser -u postgres -- "$PGBIN/initdb" -D "$PGDATA" -A trust -E UTF8 --locale=C.UTF-8 >/dev/null
cat >>"$PGDATA/postgresql.conf" <<EOF
port = $PGPORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$WORK'
shared_preload_libraries = 'dpnoise'
log_statement = 'all'
log_line_prefix = '%m [%p] %u@%d '
log_min_error_statement = error
timezone = 'UTC'
EOF
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDATA" -l "$PGLOG" -w start >/dev/null
PSQL=(runuser -u postgres -- "$PGBIN/psql" -X -q -h 127.0.0.1 -p "$PGPORT" -v ON_ERROR_STOP=1)
"${PSQL[@]}" -d postgres -c "CREATE DATABASE superset_demo"
"${PSQL[@]}" -d superset_demo -c "CREATE EXTENSION dpnoise"
log "dpnoise $("${PSQL[@]}" -d superset_demo -At -c "SELECT extversion FROM pg_extension WHERE extname = 'dpnoise'") in superset_demo"
"${PSQL[@]}" -d superset_demo -P pager=off -f "$HERE/demo_data.sql"

# -------------------------------------------------------------- Superset
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    log "installing chromium and chromium-driver from Debian"
    apt-get install -y chromium chromium-driver >"$WORK/apt.log" 2>&1
fi
if [[ ! -x "$VENV/bin/superset" ]]; then
    log "installing Superset 6.1.0 into $VENV (several minutes)"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip setuptools wheel
    # flask-caching 2.5 breaks `superset db upgrade`; without cachetools
    # adding a PostgreSQL database fails ("Could not load database driver").
    "$VENV/bin/pip" install -q "apache-superset==6.1.0" "flask-caching==2.3.1" \
        rich cachetools psycopg2-binary selenium
fi

export DPNOISE_SUPERSET_WORK="$WORK"
export SUPERSET_CONFIG_PATH="$HERE/dashboard_config.py"
export FLASK_APP=superset
SS="$VENV/bin/superset"
log "Superset metadata (SQLite), admin user"
"$SS" db upgrade >"$WORK/superset-init.log" 2>&1
"$SS" fab create-admin --username admin --firstname Ad --lastname Min \
    --email admin@example.invalid --password admin >>"$WORK/superset-init.log" 2>&1
"$SS" init >>"$WORK/superset-init.log" 2>&1
log "starting Superset on 127.0.0.1:$SSPORT"
"$SS" run -h 127.0.0.1 -p "$SSPORT" --with-threads >"$SSLOG" 2>&1 &
SSPID=$!
for _ in $(seq 1 120); do
    if curl -fs "http://127.0.0.1:$SSPORT/health" >/dev/null 2>&1; then break; fi
    kill -0 "$SSPID" 2>/dev/null || { log "Superset exited:"; tail -n 30 "$SSLOG" >&2; exit 1; }
    sleep 1
done
curl -fs "http://127.0.0.1:$SSPORT/health" >/dev/null || { log "Superset did not come up"; exit 1; }

# ---------------------------------- API, browser, figures (dashboard.py)
mkdir -p "$IMG"
"$VENV/bin/python" "$HERE/dashboard.py" \
    --superset "http://127.0.0.1:$SSPORT" \
    --pg "host=127.0.0.1 port=$PGPORT user=postgres dbname=superset_demo" \
    --analyst-uri "postgresql+psycopg2://bi_analyst@127.0.0.1:$PGPORT/superset_demo" \
    --pg-log "$PGLOG" --img "$IMG" --superset-log "$SSLOG"
