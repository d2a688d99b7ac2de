#!/usr/bin/env bash
# Installs what dpnoise needs to build and test, skipping what is already there.
# Idempotent: a second run only checks.
set -euo pipefail

PGRX_VERSION=0.18.0
PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config

need_pkgs=()
# python3-psycopg: tests/e2e/analyst.py talks to the server as a BI tool does.
for p in postgresql-15 postgresql-server-dev-15 libclang-dev clang sudo python3-psycopg; do
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

PGRX_HOME="${PGRX_HOME:-$HOME/.pgrx}"
if ! grep -qs "pg15 *= *\"${PG_CONFIG}\"" "${PGRX_HOME}/config.toml"; then
  echo "setup: cargo pgrx init --pg15 ${PG_CONFIG}"
  cargo pgrx init --pg15 "${PG_CONFIG}"
fi

# pgrx installs the extension into the system PostgreSQL's directories and its
# test server runs as the postgres user, which must be able to read the build.
echo "setup: ready (cargo-pgrx $(cargo pgrx --version | awk '{print $2}'), $(${PG_CONFIG} --version))"
