#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian machine and starts the services they use.
# Prints `export ...` lines for the caller to eval. Safe to run again: it skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { echo "test-setup: $*" >&2; }

# PostgreSQL server for the Postgres store tests.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing postgresql (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql >/dev/null; }
  else
    log "PostgreSQL is not installed and cannot be installed here: Postgres tests will be skipped"
  fi
fi
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  scripts/pg-start.sh
fi

# npm packages of the conformance tests (each directory pins its versions in package-lock.json).
for d in conformance/*/; do
  if [ -f "$d/package.json" ]; then
    log "npm ci in $d"
    (cd "$d" && npm ci --no-audit --no-fund --loglevel=error >&2)
  fi
done
# Python clients of the conformance tests (each directory pins them in requirements.txt), in a
# virtual environment inside the directory (ignored by git).
for d in conformance/*/; do
  if [ -f "$d/requirements.txt" ]; then
    if [ ! -x "$d/.venv/bin/python" ]; then
      log "python venv in $d"
      python3 -m venv "$d/.venv" >&2
    fi
    log "pip install -r $d/requirements.txt"
    "$d/.venv/bin/pip" install -q --disable-pip-version-check -r "$d/requirements.txt" >&2
  fi
done
# Every conformance test must run (not skip) when set-up succeeded.
echo "export HONE_REQUIRE_CONFORMANCE=1"
