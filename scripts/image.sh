#!/usr/bin/env bash
# Builds the real Dockerfile with a real container engine and checks the
# image (deploy/imagetest).
#   scripts/image.sh build   # the bases, then the image ($DARKROOM_IMAGE, default darkroom:test)
#   scripts/image.sh test    # build, then the image checks (go test ./deploy/imagetest)
#   scripts/image.sh bases   # only the Dockerfile's bases
# The engine is Docker where a Docker daemon answers, otherwise Podman
# (installed with apt-get if missing, run with runc and our own
# containers.conf: see scripts/engine.sh). A base that cannot be pulled is
# replaced by a stand-in built once from Debian's packages and cached under
# ~/.cache/darkroom/images. The output says which engine and bases were used.
# With Podman the host's CA bundle is mounted read-only into the build's RUN
# steps (never baked into an image) and the Go module and build caches live
# under ~/.cache/darkroom/image-build, so a rebuild after a source change
# compiles only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LOG_PREFIX=image
# shellcheck source=scripts/engine.sh
source scripts/engine.sh
IMAGE=${DARKROOM_IMAGE:-darkroom:test}

bases() {
  local b
  for b in $(awk 'toupper($1) == "FROM" {print $2}' Dockerfile); do ensure_image "$b"; done
}

build() {
  local t0=$SECONDS version
  bases
  print_bases
  version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
  local args=(build --pull=never --build-arg "VERSION=$version" -t "$IMAGE" .)
  if [ "$ENGINE" = podman ]; then
    # --format docker keeps HEALTHCHECK and STOPSIGNAL (OCI has neither).
    args+=(--format docker "${PODMAN_BUILD_MOUNTS[@]}")
  fi
  local tb=$SECONDS
  nice -n 10 "$ENGINE" "${args[@]}" >&2
  local size
  size=$("$ENGINE" image inspect --format '{{.Size}}' "$IMAGE")
  log "built $IMAGE ($version) with $ENGINE in $((SECONDS - tb)) s ($((SECONDS - t0)) s with the bases): $(awk -v s="$size" 'BEGIN {printf "%.1f MB", s / 1e6}')"
}

cmd=${1:-build}
engine_setup
case $cmd in
  bases) bases; print_bases ;;
  build) build ;;
  test)
    build
    t0=$SECONDS
    DARKROOM_IMAGE=$IMAGE DARKROOM_ENGINE=$ENGINE go test -count=1 -v -timeout 15m -run '^TestImage' ./deploy/imagetest/ 2>&1 |
      grep -v '^=== \(RUN\|PAUSE\|CONT\)'
    log "image checks took $((SECONDS - t0)) s"
    ;;
  *) echo "usage: $0 build|test|bases" >&2; exit 2 ;;
esac
