#!/usr/bin/env bash
# Brings up deploy/compose.yaml (three darkroom replicas behind HAProxy, on
# PostgreSQL and versitygw) with a real compose tool and runs the fleet
# checks through HAProxy (deploy/imagetest TestFleet).
#   scripts/fleet.sh test     # images, up, the checks, down (volumes removed)
#   scripts/fleet.sh images   # only the images: darkroom:fleet and the stand-ins
#   scripts/fleet.sh up|down  # with the state of a test run (the test calls them)
# Compose: `docker compose` with Docker, podman-compose with Podman (see
# scripts/engine.sh for the engine and the stand-ins of postgres:15,
# haproxy:2.8, versity/versitygw:latest and busybox:1.36). The fleet runs
# as project darkroom-fleet on free host ports (DARKROOM_PORT,
# DARKROOM_S3_PORT), with a random API key; state in $DARKROOM_FLEET_STATE
# (default ${TMPDIR:-/tmp}/darkroom-fleet-$UID).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LOG_PREFIX=fleet
# shellcheck source=scripts/engine.sh
source scripts/engine.sh
STATE="${DARKROOM_FLEET_STATE:-${TMPDIR:-/tmp}/darkroom-fleet-$(id -u)}"
PROJECT=darkroom-fleet

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
  local p
  while :; do p=$((20000 + RANDOM % 30000)); listening "$p" || { echo "$p"; return; }; done
}

compose() {
  # shellcheck disable=SC1091
  source "$STATE/env"
  if [ "$ENGINE" = docker ]; then
    docker compose -p "$PROJECT" -f deploy/compose.yaml "$@"
  else
    podman-compose -p "$PROJECT" -f deploy/compose.yaml "$@"
  fi
}

images() {
  DARKROOM_IMAGE=darkroom:fleet scripts/image.sh build
  local b
  for b in postgres:15 haproxy:2.8 versity/versitygw:latest busybox:1.36; do ensure_image "$b"; done
  print_bases
}

up() {
  local t0=$SECONDS
  # podman-compose 1.0.3 ignores the network's ipam subnet, which
  # DARKROOM_TRUSTED_PROXIES names: the network is made first.
  if [ "$ENGINE" = podman ] && ! podman network exists "${PROJECT}_default"; then
    podman network create --subnet 172.28.0.0/16 --label "io.podman.compose.project=$PROJECT" "${PROJECT}_default" >/dev/null
  fi
  if [ "$ENGINE" = docker ]; then
    compose up -d --no-build >&2
  else
    # podman-compose 1.0.3 starts the services in depends_on order but
    # does not wait on their conditions: a replica that finds PostgreSQL
    # not yet up exits and is restarted (restart: unless-stopped).
    compose up -d --no-build >"$STATE/compose.log" 2>&1 || { cat "$STATE/compose.log" >&2; exit 1; }
  fi
  log "compose up in $((SECONDS - t0)) s"
}

down() { # [-v]: also the volumes and the network
  local t0=$SECONDS ctrs=() anon=()
  mapfile -t ctrs < <("$ENGINE" ps -a -q --filter "label=com.docker.compose.project=$PROJECT")
  if [ "$ENGINE" = podman ] && [ ${#ctrs[@]} -gt 0 ]; then
    # podman-compose 1.0.3 stops with -t 1: stop as docker compose does,
    # SIGTERM and 10 s, so the replicas drain.
    podman stop -t 10 "${ctrs[@]}" >/dev/null
    # The replicas' anonymous /data volumes (VOLUME in the Dockerfile).
    mapfile -t anon < <(podman inspect --format '{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}}{{"\n"}}{{end}}{{end}}' "${ctrs[@]}" |
      grep -E '^[0-9a-f]{64}$' || true)
  fi
  compose down "$@" >>"$STATE/compose.log" 2>&1 || { cat "$STATE/compose.log" >&2; exit 1; }
  # The removed replicas' anonymous volumes are never used again.
  [ ${#anon[@]} -gt 0 ] && podman volume rm "${anon[@]}" >/dev/null
  if [ "${1:-}" = -v ] && [ "$ENGINE" = podman ] && podman network exists "${PROJECT}_default"; then
    podman network rm "${PROJECT}_default" >/dev/null
  fi
  log "compose down $* in $((SECONDS - t0)) s"
}

cmd=${1:-test}
engine_setup
case $cmd in
  images) images ;;
  up) up ;;
  down) shift; down "$@" ;;
  test)
    t0=$SECONDS
    images
    ti=$SECONDS
    mkdir -p "$STATE"
    port=$(free_port) s3port=$(free_port)
    cat >"$STATE/env" <<EOT
export ENGINE=$ENGINE
export DARKROOM_PORT=$port DARKROOM_S3_PORT=$s3port
export DARKROOM_API_KEYS=fleet=$(openssl rand -hex 24)
export DARKROOM_PUBLIC_URL=http://127.0.0.1:$port
export DARKROOM_S3_PUBLIC_ENDPOINT=http://127.0.0.1:$s3port
export DARKROOM_S3_SECRET=$(openssl rand -hex 24)
# A killed replica's generations are taken over when its lease expires
# (compose default 2m): shorter here, as TestFleetBehindHAProxy's 3s.
export DARKROOM_RUNNER_LEASE=${DARKROOM_RUNNER_LEASE:-10s}
export DARKROOM_FLEET=$STATE DARKROOM_FLEET_PROJECT=$PROJECT
EOT
    [ "$ENGINE" = podman ] && echo "export CONTAINERS_CONF=$CONTAINERS_CONF" >>"$STATE/env"
    compose down -v >/dev/null 2>&1 || true # a previous run's leftovers
    trap 'compose logs >"$STATE/logs" 2>&1 || true; down -v || true' EXIT
    up
    DARKROOM_ENGINE=$ENGINE go test -count=1 -v -timeout 20m -run '^TestFleet' ./deploy/imagetest/ 2>&1 | grep -v '^=== \(RUN\|PAUSE\|CONT\)'
    log "fleet checks took $((SECONDS - ti)) s ($((SECONDS - t0)) s with the images)"
    ;;
  *) echo "usage: $0 test|images|up|down" >&2; exit 2 ;;
esac
