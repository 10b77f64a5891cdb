#!/usr/bin/env bash
# Starts (or stops) a throw-away PostgreSQL server on loopback for the test suite, and prints its URL.
#   scripts/test-postgres.sh start   -> prints postgres://iap:iap@127.0.0.1:55432/iap_test
#   scripts/test-postgres.sh ca      -> prints the path of the test CA that signed the server's certificate
#   scripts/test-postgres.sh stop
#   scripts/test-postgres.sh crash | resume     (an immediate stop, and a start of the same folder: ledger outages)
#   scripts/test-postgres.sh read-only on|off   (default_transaction_read_only for every session, open ones too:
#                                                a server that answers but takes no writes, SQLSTATE 25006)
# The server speaks TLS (ssl=on) with a certificate for localhost and 127.0.0.1 signed by a CA made here with
# openssl; plain connections keep working. Next to the CA lies untrusted-ca.crt, a second CA that signed
# nothing, for tests that must see verification fail. The server also listens on 127.0.0.2, an address its
# certificate does not name, for tests that must see host-name verification fail. Passwords are checked over TCP (scram-sha-256), so a
# wrong password is refused; the set-up itself goes through the Unix socket.
# Runs the server as the 'postgres' user when invoked as root (PostgreSQL refuses to run as root).
set -euo pipefail

# The port: IAP_TEST_POSTGRES_PORT, else 55432 or, when something else listens there, the next free one. A server
# this script did not start is never used: a port asked for and taken fails, naming what holds it.
PORT_ASKED="${IAP_TEST_POSTGRES_PORT:-}"
PORT="${PORT_ASKED:-55432}"
DIR="${IAP_TEST_POSTGRES_DIR:-/tmp/iap-worker-test-pg}"
TLS_DIR="$DIR-tls"
# The folder is the machine's (every checkout's tests share the one server): two test runs starting at once would both
# make it anew and neither server would start. Starts and stops take turns on a lock beside it, held by flock(1)
# alone (-o): a server the script leaves running must not inherit the lock, or the next stop would wait for ever.
case "${1:-}" in
  start | stop | crash | resume)
    # Ten minutes at most: a start or stop left hanging elsewhere is named, not waited for without end.
    if [ -z "${IAP_TEST_POSTGRES_LOCKED:-}" ]; then
      status=0
      IAP_TEST_POSTGRES_LOCKED=1 flock -w 600 -E 75 -o "$DIR.lock" bash "$0" "$@" || status=$?
      [ "$status" -ne 75 ] || echo "test-postgres: $DIR.lock was held for 10 minutes by another start or stop" >&2
      exit "$status"
    fi
    ;;
esac
BIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
[ -n "$BIN" ] || { echo "test-postgres: PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 1; }

server_options() {
  echo "-p $PORT -k $DIR -c listen_addresses=127.0.0.1,127.0.0.2 -c max_connections=300 -c fsync=off -c ssl=on"
}

# Whether any TCP socket holds port $1 as its own: a listener, or a connection whose local end it is. 55432 lies in
# Linux's ephemeral range (32768-60999), so a client's connection can hold it, and then the server's bind to
# 127.0.0.1 fails while its 127.0.0.2 succeeds: a server that starts and refuses every test (seen in CI).
port_taken() {
  [ -n "$(ss -Htan "sport = :$1" 2>/dev/null)" ]
}

# Whether the server in $DIR accepts TCP connections on 127.0.0.1:$PORT, the address the tests use.
answers_on_loopback() {
  as_owner "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" -t 5
}

# What holds port $1 (a listener or a connection's local end), for the error message.
port_holder() {
  ss -Htanp "sport = :$1" 2>/dev/null | sed -n 's/.*users:((\(.*\))).*/\1/p' | head -n 1
}

# The port of the server running in $DIR: the fourth line of its postmaster.pid (also for a server an older version
# of this script started, which recorded nothing), else the one recorded at start.
recorded_port() {
  sed -n 4p "$DIR/postmaster.pid" 2>/dev/null | grep -E '^[0-9]+$' || cat "$DIR/iap-test-port" 2>/dev/null || echo "$PORT"
}

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# A CA, a server certificate it signs (SAN localhost and 127.0.0.1), and an unrelated second CA.
make_certificates() {
  command -v openssl >/dev/null || { echo "test-postgres: openssl is not installed (apt-get install openssl)" >&2; exit 1; }
  rm -rf "$TLS_DIR"
  mkdir -p "$TLS_DIR"
  openssl req -batch -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=iap-worker test CA" \
    -keyout "$TLS_DIR/ca.key" -out "$TLS_DIR/ca.crt" 2>/dev/null
  openssl req -batch -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=iap-worker untrusted CA" \
    -keyout "$TLS_DIR/untrusted-ca.key" -out "$TLS_DIR/untrusted-ca.crt" 2>/dev/null
  openssl req -batch -newkey rsa:2048 -nodes -subj "/CN=localhost" \
    -keyout "$TLS_DIR/server.key" -out "$TLS_DIR/server.csr" 2>/dev/null
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$TLS_DIR/server.ext"
  openssl x509 -req -in "$TLS_DIR/server.csr" -CA "$TLS_DIR/ca.crt" -CAkey "$TLS_DIR/ca.key" -CAcreateserial \
    -days 30 -extfile "$TLS_DIR/server.ext" -out "$TLS_DIR/server.crt" 2>/dev/null
  # The server reads its key and certificate from its data folder; the key must belong to it, mode 0600.
  install -m 0644 "$TLS_DIR/server.crt" "$DIR/server.crt"
  install -m 0600 "$TLS_DIR/server.key" "$DIR/server.key"
  [ "$(id -u)" -eq 0 ] && chown postgres "$DIR/server.crt" "$DIR/server.key"
  chmod 0755 "$TLS_DIR"
  chmod 0644 "$TLS_DIR"/*.crt
}

case "${1:-start}" in
  start)
    # A server left by an older version of this script (no TLS) is replaced.
    if as_owner "$BIN/pg_ctl" -D "$DIR" status >/dev/null 2>&1 && [ ! -f "$TLS_DIR/ca.crt" ]; then
      as_owner "$BIN/pg_ctl" -D "$DIR" -m fast stop >/dev/null 2>&1 || true
    fi
    if as_owner "$BIN/pg_ctl" -D "$DIR" status >/dev/null 2>&1; then
      running="$(recorded_port)"
      if [ -n "$PORT_ASKED" ] && [ "$running" != "$PORT_ASKED" ]; then
        echo "test-postgres: the server in $DIR listens on $running, not on the port asked for ($PORT_ASKED): stop it first" >&2
        exit 1
      fi
      PORT="$running"
      # A server started by an older version of this script: its role may create roles (the console's test needs it).
      as_owner "$BIN/psql" -h "$DIR" -p "$PORT" -U postgres -q -c "ALTER ROLE iap CREATEROLE" >/dev/null 2>&1 || true
    else
      if port_taken "$PORT"; then
        if [ -n "$PORT_ASKED" ]; then
          echo "test-postgres: port $PORT is taken by a socket this script did not open ($(port_holder "$PORT" || true)); free it or set IAP_TEST_POSTGRES_PORT to another port" >&2
          exit 1
        fi
        taken="$PORT"
        while port_taken "$PORT"; do
          PORT=$((PORT + 1))
          [ "$PORT" -lt $((taken + 200)) ] || { echo "test-postgres: no free port in $taken…$PORT" >&2; exit 1; }
        done
        echo "test-postgres: port $taken is taken ($(port_holder "$taken" || true)): using $PORT" >&2
      fi
      rm -rf "$DIR"
      mkdir -p "$DIR"
      [ "$(id -u)" -eq 0 ] && chown postgres "$DIR"
      as_owner "$BIN/initdb" -D "$DIR" --auth-local=trust --auth-host=scram-sha-256 -U postgres >/dev/null
      make_certificates
      # A port taken between the check and the bind (a connection's local end) leaves PostgreSQL listening on
      # 127.0.0.2 alone, which it counts as a start: such a server is stopped and the next free port tried.
      for attempt in 1 2 3 4 5; do
        echo "$PORT" > "$DIR/iap-test-port"
        as_owner "$BIN/pg_ctl" -D "$DIR" -w -l "$DIR/server.log" -o "$(server_options)" start >/dev/null
        answers_on_loopback && break
        as_owner "$BIN/pg_ctl" -D "$DIR" -m fast stop >/dev/null 2>&1 || true
        if [ -n "$PORT_ASKED" ] || [ "$attempt" -eq 5 ]; then
          echo "test-postgres: the server started but does not answer on 127.0.0.1:$PORT (see $DIR/server.log)" >&2
          exit 1
        fi
        taken="$PORT"
        PORT=$((PORT + 1))
        while port_taken "$PORT"; do PORT=$((PORT + 1)); done
        echo "test-postgres: 127.0.0.1:$taken could not be bound: using $PORT" >&2
      done
      as_owner "$BIN/psql" -h "$DIR" -p "$PORT" -U postgres -q -c "CREATE ROLE iap LOGIN PASSWORD 'iap' CREATEDB CREATEROLE" >/dev/null
      as_owner "$BIN/psql" -h "$DIR" -p "$PORT" -U postgres -q -c "CREATE DATABASE iap_test OWNER iap" >/dev/null
    fi
    echo "postgres://iap:iap@127.0.0.1:$PORT/iap_test"
    ;;
  ca)
    [ -f "$TLS_DIR/ca.crt" ] || { echo "test-postgres: no test CA yet: run '$0 start' first" >&2; exit 1; }
    echo "$TLS_DIR/ca.crt"
    ;;
  stop)
    as_owner "$BIN/pg_ctl" -D "$DIR" -m fast stop >/dev/null 2>&1 || true
    ;;
  crash)
    # An outage as a crash makes it: every server process killed at once, connections cut (tests of ledger outages).
    as_owner "$BIN/pg_ctl" -D "$DIR" -m immediate stop >/dev/null
    ;;
  resume)
    # Starts the server of an existing folder again (after crash), on the port it had.
    PORT="$(recorded_port)"
    as_owner "$BIN/pg_ctl" -D "$DIR" -w -l "$DIR/server.log" -o "$(server_options)" start >/dev/null
    ;;
  read-only)
    # ALTER SYSTEM and a reload reach the sessions already open (the worker's pool), which ALTER DATABASE would not.
    case "${2:-}" in on | off) ;; *) echo "usage: $0 read-only on|off" >&2; exit 2 ;; esac
    PORT="$(recorded_port)"
    as_owner "$BIN/psql" -h "$DIR" -p "$PORT" -U postgres -q -v ON_ERROR_STOP=1 \
      -c "ALTER SYSTEM SET default_transaction_read_only = $2" -c "SELECT pg_reload_conf()" >/dev/null
    ;;
  *)
    echo "usage: $0 start|ca|stop|crash|resume|read-only on|off" >&2
    exit 2
    ;;
esac
