#!/usr/bin/env bash
# Starts or stops a throwaway versitygw (S3 API, posix backend) on 127.0.0.1
# for the blob S3 tests.
#   scripts/s3-test-server.sh start   # prints the path of an env file; source it
#   scripts/s3-test-server.sh stop
# State (pid, data, log, env) lives in $DARKROOM_S3_STATE
# (default ${TMPDIR:-/tmp}/darkroom-s3-$UID). start is a no-op if it is running.
set -euo pipefail
STATE="${DARKROOM_S3_STATE:-${TMPDIR:-/tmp}/darkroom-s3-$(id -u)}"
BIN="${DARKROOM_CACHE:-$HOME/.cache/darkroom}/bin/versitygw"
ACCESS=testkey SECRET=testsecret

running() { [ -f "$STATE/pid" ] && kill -0 "$(cat "$STATE/pid")" 2>/dev/null; }
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start() {
  if running; then echo "$STATE/env"; return; fi
  "$(dirname "$0")/tools.sh" versitygw
  rm -rf "$STATE" && mkdir -p "$STATE/data"
  local try port pid
  for try in 1 2 3 4 5; do
    port=$(( 20000 + RANDOM % 30000 ))
    listening "$port" && continue
    ROOT_ACCESS_KEY_ID=$ACCESS ROOT_SECRET_ACCESS_KEY=$SECRET \
      nohup "$BIN" --port "127.0.0.1:$port" posix "$STATE/data" >"$STATE/log" 2>&1 </dev/null &
    pid=$!
    for _ in $(seq 100); do
      kill -0 "$pid" 2>/dev/null || break
      if listening "$port"; then
        echo "$pid" >"$STATE/pid"
        cat >"$STATE/env" <<EOF
export DARKROOM_TEST_S3_ENDPOINT=http://127.0.0.1:$port
export DARKROOM_TEST_S3_ACCESS_KEY=$ACCESS
export DARKROOM_TEST_S3_SECRET_KEY=$SECRET
export DARKROOM_TEST_VERSITYGW=$BIN
EOF
        echo "$STATE/env"
        return
      fi
      sleep 0.05
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  echo "s3-test-server: versitygw did not start; log:" >&2
  cat "$STATE/log" >&2
  exit 1
}

stop() {
  if running; then
    local pid; pid=$(cat "$STATE/pid")
    kill "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -rf "$STATE"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
