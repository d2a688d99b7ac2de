# Shared by run.sh, test.sh and bench/run.sh: a PostgreSQL server of our
# own, run as the postgres user (PostgreSQL refuses root) on a loopback port.
# PG picks the major: 15 (the default) is Debian's; 16 and 18 are the
# installations scripts/setup.sh unpacks under /opt/dpnoise-pg; 17 is used
# from /opt/dpnoise-pg/17 if one is put there (none is, and it is untested).
PG=${PG:-15}
case $PG in
  15) PG_BIN=/usr/lib/postgresql/15/bin ;;
  16 | 17 | 18) PG_BIN=/opt/dpnoise-pg/$PG/bin ;;
  *) echo "PG=$PG: dpnoise builds for PostgreSQL 15 to 18 (README, \"Supported versions\")" >&2; exit 2 ;;
esac
# Another installation of that major (a private copy, a 17 of your own).
PG_BIN=${DPNOISE_PG_BIN:-$PG_BIN}
PG_CONFIG=$PG_BIN/pg_config
# tests/e2e/*.py start their servers from the same installation.
export PG PG_BIN
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

as_postgres() { runuser -u postgres -- "$@"; }

# free_port PORT: PORT, or the next port after it that nothing listens on.
free_port() {
  local port=$1
  while ! /usr/bin/python3 -c "import socket,sys; s=socket.socket(); s.bind(('127.0.0.1', $port))" 2>/dev/null; do
    port=$((port + 1))
  done
  echo "$port"
}

# pg_ctl_up DATADIR start|restart: pg_ctl with the server's own log; when the
# server does not come up, the log's tail is printed (a CI run keeps nothing
# else) and it is tried once more, in case the port was briefly taken.
pg_ctl_up() {
  local dir=$1 action=$2
  as_postgres "$PG_BIN/pg_ctl" -D "$dir" -l "$dir/server.log" -w "$action" >/dev/null && return 0
  echo "pg_ctl $action $dir failed; the server log's tail:" >&2
  tail -20 "$dir/server.log" >&2 || true
  sleep 2
  as_postgres "$PG_BIN/pg_ctl" -D "$dir" -l "$dir/server.log" -w start >/dev/null || {
    tail -20 "$dir/server.log" >&2; return 1; }
}

# start_server DATADIR PORT: initdb on first use, (re)start with dpnoise preloaded.
start_server() {
  local dir=$1 port=$2
  if [ ! -f "$dir/PG_VERSION" ]; then
    mkdir -p "$dir"
    chown postgres:postgres "$dir"
    chmod 700 "$dir"
    as_postgres "$PG_BIN/initdb" -D "$dir" --auth=trust -U postgres >/dev/null
    cat >>"$dir/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
shared_preload_libraries = 'dpnoise'
CONF
  fi
  as_postgres "$PG_BIN/pg_ctl" -D "$dir" -l "$dir/server.log" -w restart >/dev/null 2>&1 || {
    as_postgres "$PG_BIN/pg_ctl" -D "$dir" -l "$dir/server.log" -w start >/dev/null || {
      tail -20 "$dir/server.log"; return 1; }
  }
}

stop_server() {
  [ -f "$1/postmaster.pid" ] && as_postgres "$PG_BIN/pg_ctl" -D "$1" -w stop -m fast >/dev/null || true
}

# regress_suite PORT: the SQL regression suite (tests/pg_regress) with this
# PostgreSQL's pg_regress, against a server started by start_server; prints
# the differences and fails if a test does.
regress_suite() {
  local out status=0
  out=$(mktemp -d)
  chmod 777 "$out"
  "$(dirname "$("$PG_CONFIG" --pgxs)")/../test/regress/pg_regress" \
    --bindir="$PG_BIN" --host=127.0.0.1 --port="$1" --user=postgres --dbname=dpnoise_regress \
    --inputdir="$REPO/tests/pg_regress" --outputdir="$out" \
    setup $(ls "$REPO/tests/pg_regress/sql" | sed 's/\.sql$//' | grep -vx setup | sort) || status=$?
  if [ $status -ne 0 ]; then
    cat "$out/regression.diffs" 2>/dev/null || true
  fi
  rm -rf "$out"
  return $status
}

# Builds dpnoise in release mode for $PG and installs it into that PostgreSQL
# (Debian's for 15).
# Each file is written beside its destination and renamed over it: a running
# server that has dpnoise.so mapped keeps the old file's inode, where
# rewriting the file in place (as `cargo pgrx install` does) crashes every
# backend that has it loaded.
# `cargo pgrx package` stages the control file, the current version's script
# (generated) and the upgrade scripts sql/dpnoise--A--B.sql, but no other
# full script: sql/dpnoise--0.1.0.sql, the first version's, is installed
# from the repository. PostgreSQL installs any older version from it
# through the upgrade scripts (`CREATE EXTENSION dpnoise VERSION '0.5.0'`),
# which is how scripts/upgrade_test.sh tests each upgrade.
install_extension() {
  local staged="${CARGO_TARGET_DIR:-$REPO/target}/release/dpnoise-pg$PG"
  # Packaging adds to the staged tree and never removes: a script of an
  # earlier current version left there would be installed again.
  rm -rf "$staged"
  (cd "$REPO" && cargo pgrx package --pg-config "$PG_CONFIG" >/dev/null)
  [ -d "$staged" ] || { echo "install: no package in $staged" >&2; return 1; }
  local lib ext
  lib=$("$PG_CONFIG" --pkglibdir)
  ext=$("$PG_CONFIG" --sharedir)/extension
  place_file "$staged$lib/dpnoise.so" "$lib/dpnoise.so"
  local f name shipped=" "
  for f in "$staged$ext"/* "$REPO"/sql/dpnoise--*.sql; do
    name=$(basename "$f")
    case $shipped in *" $name "*) continue ;; esac
    place_file "$f" "$ext/$name"
    shipped+="$name "
  done
  # Scripts an older install left (the frozen full scripts of 0.2.0 to
  # 0.12.0 were installed until 0.13.0) go: CREATE EXTENSION runs a
  # version's full script when there is one, so the upgrade test would no
  # longer install that version through the chain.
  for f in "$ext"/dpnoise--*.sql; do
    case $shipped in *" $(basename "$f") "*) ;; *) rm -f "$f" ;; esac
  done
}

# Gives the installed dpnoise.so a fresh inode with the same contents, so
# that a tool which then rewrites it in place (`cargo pgrx test` installs
# that way) writes a file no running server has mapped.
detach_library() {
  local lib
  lib=$("$PG_CONFIG" --pkglibdir)/dpnoise.so
  if [ -f "$lib" ]; then place_file "$lib" "$lib"; fi
}

# place_file SRC DEST: copies SRC next to DEST, then renames it over DEST.
place_file() {
  local tmp
  tmp="$(dirname "$2")/.$(basename "$2").$$"
  install -m 644 "$1" "$tmp"
  mv -f "$tmp" "$2"
}
