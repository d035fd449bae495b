#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server on loopback for the tests (Debian's postgresql package),
# and prints the DSN to export as HONE_TEST_POSTGRES_DSN. Usage: eval "$(scripts/pg-start.sh)"
set -euo pipefail
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$PGBIN" ]; then echo "pg-start: PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 1; fi
PGDIR=${HONE_PG_DIR:-/tmp/hone-pg}
PORT=${HONE_PG_PORT:-55432}
RUN=(runuser -u postgres --)
[ "$(id -u)" = 0 ] || RUN=()
if [ ! -f "$PGDIR/PG_VERSION" ]; then
  mkdir -p "$PGDIR"
  [ "$(id -u)" = 0 ] && chown postgres:postgres "$PGDIR"
  "${RUN[@]}" "$PGBIN/initdb" -D "$PGDIR" -U postgres --auth=trust >/dev/null
fi
if ! "${RUN[@]}" "$PGBIN/pg_ctl" -D "$PGDIR" status >/dev/null 2>&1; then
  # The server outlives this script, so it must hold none of its caller's descriptors (a lock
  # or a pipe of whoever ran make test would stay held for as long as the server runs): in a
  # subshell every descriptor but 0-2 is closed, stdin is /dev/null and stdout and stderr go to
  # the log; pg_ctl passes those on to the server (-l: the log again). The subshell's own
  # output is the log too, so a command substitution of this script is not held open.
  touch "$PGDIR/log"
  if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$PGDIR/log"; fi
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
    done
    exec "${RUN[@]}" "$PGBIN/pg_ctl" -D "$PGDIR" -l "$PGDIR/log" -w \
      -o "-c listen_addresses=127.0.0.1 -p $PORT -k /tmp -c fsync=off -c max_connections=300" start \
      </dev/null >>"$PGDIR/log" 2>&1
  ) || { echo "pg-start: the server did not start (see $PGDIR/log)" >&2; exit 1; }
fi
"${RUN[@]}" "$PGBIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='hone_test'" | grep -q 1 ||
  "${RUN[@]}" "$PGBIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -qc "CREATE DATABASE hone_test"
echo "export HONE_TEST_POSTGRES_DSN=postgres://postgres@127.0.0.1:$PORT/hone_test?sslmode=disable"
