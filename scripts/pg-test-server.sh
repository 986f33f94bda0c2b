#!/usr/bin/env bash
# Starts or stops a throwaway PostgreSQL (Debian's package, installed if
# missing) on 127.0.0.1 for the PostgreSQL engine's tests.
#   scripts/pg-test-server.sh start   # prints the path of an env file; source it
#   scripts/pg-test-server.sh stop
#   scripts/pg-test-server.sh pause    # stops the server, keeping its data
#   scripts/pg-test-server.sh resume   # starts it again on the same port
# DARKROOM_PG_FSYNC=on starts it with fsync (default off, to spare the
# shared disk). State (data, log, socket, env) lives in $DARKROOM_PG_STATE
# (default ${TMPDIR:-/tmp}/darkroom-pg-$UID). start is a no-op if it runs.
# PostgreSQL refuses to run as root, so the server runs as the postgres
# user; the data folder is that user's.
set -euo pipefail
STATE="${DARKROOM_PG_STATE:-${TMPDIR:-/tmp}/darkroom-pg-$(id -u)}"

pgbin() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/pg_ctl" ] && { echo "$d"; return; }
  done
  return 1
}

install_pg() {
  if ! pgbin >/dev/null; then
    echo "pg-test-server: installing Debian's postgresql" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
  fi
}

as_pg() {
  if [ "$(id -u)" = 0 ]; then su postgres -s /bin/bash -c "$*"; else bash -c "$*"; fi
}

running() { [ -f "$STATE/env" ] && as_pg "$(pgbin)/pg_ctl -D '$STATE/data' status" >/dev/null 2>&1; }
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pg_start() { # bin port
  # Durable commits stay on (synchronous_commit is what production
  # runs); fsync off only spares the shared disk in tests, and
  # DARKROOM_PG_FSYNC=on (the benchmarks' own server) turns it back on.
  local fsync=${DARKROOM_PG_FSYNC:-off}
  [ -f "$STATE/fsync" ] && fsync=$(cat "$STATE/fsync")
  as_pg "'$1/pg_ctl' -D '$STATE/data' -l '$STATE/log' -w -t 30 -o \"-c listen_addresses=127.0.0.1 -p $2 -k '$STATE' -c fsync=$fsync -c synchronous_commit=on -c max_connections=300\" start" >/dev/null 2>&1 &&
    echo "$fsync" >"$STATE/fsync"
}

# pause and resume take a running test server down and up again, for the
# database-restart test (on a server of its own).
pause() { as_pg "'$(pgbin)/pg_ctl' -D '$STATE/data' -w -m fast stop" >/dev/null; }
resume() {
  pg_start "$(pgbin)" "$(cat "$STATE/port")" || { cat "$STATE/log" >&2; exit 1; }
}

start() {
  if running; then echo "$STATE/env"; return; fi
  install_pg
  local bin; bin=$(pgbin)
  rm -rf "$STATE" && mkdir -p "$STATE"
  [ "$(id -u)" = 0 ] && chown postgres "$STATE"
  as_pg "'$bin/initdb' -D '$STATE/data' -U postgres --auth=trust -E UTF8 --no-sync" >"$STATE/initdb.log" 2>&1 || {
    cat "$STATE/initdb.log" >&2; exit 1; }
  local try port
  for try in 1 2 3 4 5; do
    port=$(( 20000 + RANDOM % 30000 ))
    listening "$port" && continue
    if pg_start "$bin" "$port"; then
      echo "$port" >"$STATE/port"
      cat >"$STATE/env" <<EOT
export DARKROOM_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable
export DARKROOM_TEST_PG_BIN=$bin
EOT
      echo "$STATE/env"
      return
    fi
  done
  echo "pg-test-server: postgres did not start; log:" >&2
  cat "$STATE/log" >&2 || true
  exit 1
}

stop() {
  if [ -d "$STATE/data" ]; then
    as_pg "'$(pgbin)/pg_ctl' -D '$STATE/data' -w -m fast stop" >/dev/null 2>&1 || true
  fi
  rm -rf "$STATE"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  pause) pause ;;
  resume) resume ;;
  *) echo "usage: $0 start|stop|pause|resume" >&2; exit 2 ;;
esac
