#!/usr/bin/env bash
# Starts or stops a throwaway HAProxy (Debian's package, installed if
# missing) on 127.0.0.1, round-robin over the given backends with no
# stickiness, health-checking /readyz, for the fleet tests.
#   scripts/haproxy.sh start STATE HOST:PORT...   # prints 127.0.0.1:PORT
#   scripts/haproxy.sh stop STATE                  # stops it by PID
#   scripts/haproxy.sh install                     # only installs it
# STATE is a folder of its own (config, pid, log, stats socket).
# HAPROXY_TIMEOUT (default 5m) is its client and server idle timeout.
set -euo pipefail

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

install() {
  command -v haproxy >/dev/null && return
  echo "haproxy.sh: installing Debian's haproxy" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >&2
}

config() { # port backends...
  local port=$1 i=0 b; shift
  cat <<EOT
global
  maxconn 2000
  stats socket $STATE/stats.sock mode 600 level admin
defaults
  mode http
  timeout connect 2s
  timeout client ${HAPROXY_TIMEOUT:-5m}
  timeout server ${HAPROXY_TIMEOUT:-5m}
  timeout tunnel 1h
  # A check's whole time (else 'inter': a replica busy for 300 ms on a
  # loaded machine would be marked down, and all three at once is a 503).
  timeout check 2s
  # A request whose connection to a dead replica fails goes to another.
  retries 3
  option redispatch 1
  option forwardfor
frontend fleet
  bind 127.0.0.1:$port
  default_backend darkroom
backend darkroom
  balance roundrobin
  option httpchk GET /readyz
  default-server check inter 300ms fall 1 rise 1
EOT
  for b in "$@"; do echo "  server r$i $b"; i=$((i + 1)); done
}

start() {
  install
  mkdir -p "$STATE"
  local try port pid
  for try in 1 2 3 4 5; do
    port=$(( 20000 + RANDOM % 30000 ))
    listening "$port" && continue
    config "$port" "$@" >"$STATE/haproxy.cfg"
    nohup haproxy -db -f "$STATE/haproxy.cfg" >"$STATE/log" 2>&1 </dev/null &
    pid=$!
    for _ in $(seq 100); do
      kill -0 "$pid" 2>/dev/null || break
      if listening "$port"; then echo "$pid" >"$STATE/pid"; echo "127.0.0.1:$port"; return; fi
      sleep 0.05
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  echo "haproxy.sh: haproxy did not start; log:" >&2
  cat "$STATE/log" >&2
  exit 1
}

stop() {
  [ -f "$STATE/pid" ] || return 0
  local pid; pid=$(cat "$STATE/pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$STATE/pid"
}

cmd=${1:-}; STATE=${2:-}
[ "$cmd" = install ] && { install; exit 0; }
[ -n "$STATE" ] || { echo "usage: $0 start STATE HOST:PORT... | stop STATE" >&2; exit 2; }
shift 2
case "$cmd" in
  start) [ $# -gt 0 ] || { echo "haproxy.sh: no backends" >&2; exit 2; }; start "$@" ;;
  stop) stop ;;
  *) echo "usage: $0 start STATE HOST:PORT... | stop STATE" >&2; exit 2 ;;
esac
