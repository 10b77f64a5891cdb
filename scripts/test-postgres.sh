#!/usr/bin/env bash
# Starts (or stops) a throw-away PostgreSQL server on loopback for the test suite, and prints its URL.
#   scripts/test-postgres.sh start   -> prints postgres://iap:iap@127.0.0.1:55432/iap_test
#   scripts/test-postgres.sh stop
#   scripts/test-postgres.sh crash | resume     (an immediate stop, and a start of the same folder: ledger outages)
# Runs the server as the 'postgres' user when invoked as root (PostgreSQL refuses to run as root).
set -euo pipefail

PORT="${IAP_TEST_POSTGRES_PORT:-55432}"
DIR="${IAP_TEST_POSTGRES_DIR:-/tmp/iap-worker-test-pg}"
BIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
[ -n "$BIN" ] || { echo "test-postgres: PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 1; }

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "${1:-start}" in
  start)
    if ! as_owner "$BIN/pg_ctl" -D "$DIR" status >/dev/null 2>&1; then
      rm -rf "$DIR"
      mkdir -p "$DIR"
      [ "$(id -u)" -eq 0 ] && chown postgres "$DIR"
      as_owner "$BIN/initdb" -D "$DIR" -A trust -U postgres >/dev/null
      as_owner "$BIN/pg_ctl" -D "$DIR" -w -l "$DIR/server.log" \
        -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off" start >/dev/null
      as_owner "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -q -c "CREATE ROLE iap LOGIN PASSWORD 'iap' CREATEDB" >/dev/null
      as_owner "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -q -c "CREATE DATABASE iap_test OWNER iap" >/dev/null
    fi
    echo "postgres://iap:iap@127.0.0.1:$PORT/iap_test"
    ;;
  stop)
    as_owner "$BIN/pg_ctl" -D "$DIR" -m fast stop >/dev/null 2>&1 || true
    ;;
  crash)
    # An outage as a crash makes it: every server process killed at once, connections cut (tests of ledger outages).
    as_owner "$BIN/pg_ctl" -D "$DIR" -m immediate stop >/dev/null
    ;;
  resume)
    # Starts the server of an existing folder again (after crash).
    as_owner "$BIN/pg_ctl" -D "$DIR" -w -l "$DIR/server.log" \
      -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off" start >/dev/null
    ;;
  *)
    echo "usage: $0 start|stop|crash|resume" >&2
    exit 2
    ;;
esac
