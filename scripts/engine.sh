# Sourced by scripts/image.sh and scripts/fleet.sh: picks the container
# engine, configures Podman for these machines, and builds the stand-in
# base images a Dockerfile names when no registry can serve them.
#
#   engine_setup          sets ENGINE (docker|podman) and, for Podman,
#                         CONTAINERS_CONF (runc, ulimits), installing
#                         podman, buildah, runc, podman-compose and
#                         debootstrap with apt-get when no engine is there
#   ensure_image NAME     NAME is present locally: pulled if the engine can
#                         pull it, otherwise a stand-in is built (cached)
#   standin_* NAME        the stand-in recipes, one per base
#
# Stand-ins are cached under $CACHE/images, keyed by what they are made
# from (the Debian mirror and suite, the package list, the Go version, the
# recipe itself): root file systems and image archives, so a second run
# only imports an archive (or finds the image already there).
# DARKROOM_ENGINE=docker|podman forces an engine; DARKROOM_STANDINS=always
# builds stand-ins even where the real base could be pulled.
# shellcheck shell=bash

CACHE="${DARKROOM_CACHE:-$HOME/.cache/darkroom}"
IMAGES="$CACHE/images"
STANDIN_LABEL=io.darkroom.standin
# The recipe version: bump it when a stand-in recipe changes.
STANDIN_RECIPE=3
DEBIAN_SUITE=bookworm
DEBIAN_INCLUDE=ca-certificates,git,netbase,tzdata
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

log() { echo "${LOG_PREFIX:-engine}: $*" >&2; }
die() { log "$*"; exit 1; }

apt_install() { # packages...
  local missing=() p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return
  [ "$(id -u)" = 0 ] || die "need root to install ${missing[*]} (apt-get)"
  log "installing ${missing[*]} (apt-get, once per machine)"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
}

engine_setup() {
  ENGINE=${DARKROOM_ENGINE:-}
  if [ -z "$ENGINE" ]; then
    if command -v docker >/dev/null && docker info >/dev/null 2>&1 &&
      ! docker info 2>/dev/null | grep -qi podman; then
      ENGINE=docker
    else
      ENGINE=podman
    fi
  fi
  case $ENGINE in
    docker) ;;
    podman)
      apt_install podman buildah runc podman-compose debootstrap
      # crun cannot start a container here ("cgroups in hybrid mode not
      # supported"), and Podman's default rlimits exceed what root may
      # raise: a containers.conf of our own, not /etc's.
      mkdir -p "$CACHE"
      CONTAINERS_CONF="$CACHE/containers.conf"
      cat >"$CONTAINERS_CONF.tmp" <<'EOT'
# Written by darkroom's scripts/engine.sh for its own podman runs.
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
EOT
      mv "$CONTAINERS_CONF.tmp" "$CONTAINERS_CONF"
      export CONTAINERS_CONF
      ;;
    *) die "DARKROOM_ENGINE must be docker or podman, not $ENGINE" ;;
  esac
  log "engine: $ENGINE ($($ENGINE --version))"
}

image_exists() { "$ENGINE" image inspect "$1" >/dev/null 2>&1; }
image_label() { "$ENGINE" image inspect --format "{{index .Config.Labels \"$2\"}}" "$1" 2>/dev/null || true; }

# BASES_USED collects one line per base: "NAME: how".
BASES_USED=()

# ensure_image NAME: the real image if present or pullable, else the
# stand-in (built once per key, imported from its cached archive).
ensure_image() {
  local name=$1 fn key
  fn=$(standin_fn "$name")
  if [ "${DARKROOM_STANDINS:-auto}" != always ]; then
    if image_exists "$name" && [ -z "$(image_label "$name" "$STANDIN_LABEL")" ]; then
      BASES_USED+=("$name: the real image (already present)"); return
    fi
    if [ -z "$(image_label "$name" "$STANDIN_LABEL")" ] && "$ENGINE" pull -q "$(qualified "$name")" >/dev/null 2>&1; then
      BASES_USED+=("$name: the real image (pulled)"); return
    fi
  fi
  [ -n "$fn" ] || die "$name cannot be pulled and has no stand-in recipe"
  key=$("$fn" key)
  if [ "$(image_label "$name" "$STANDIN_LABEL")" = "$key" ]; then
    BASES_USED+=("$name: stand-in $key (present)"); return
  fi
  local t0=$SECONDS
  "$fn" build "$key"
  BASES_USED+=("$name: stand-in $key (made in $((SECONDS - t0)) s)")
}

print_bases() { # once per base, as first found
  local b
  for b in "${BASES_USED[@]}"; do echo "$b"; done | awk -F': ' '!seen[$1]++' | while read -r b; do log "base $b"; done
}

standin_fn() {
  case $1 in
    golang:1.26-bookworm) echo standin_golang ;;
    gcr.io/distroless/static-debian12:nonroot) echo standin_distroless ;;
    debian:bookworm) echo standin_debian ;;
    postgres:15) echo standin_postgres ;;
    haproxy:2.8) echo standin_haproxy ;;
    versity/versitygw:latest) echo standin_versitygw ;;
    busybox:1.36) echo standin_busybox ;;
  esac
}

hash12() { sha256sum | cut -c1-12; }

# qualified NAME: the name as the engine stores it. Podman would store a
# short name as localhost/NAME, which a FROM of that short name does not
# find once a search registry is configured: docker.io/library/ as Docker.
qualified() {
  local n=$1 first=${1%%/*}
  if [ "$ENGINE" = podman ] && [[ $n != */* || ($first != *.* && $first != *:* && $first != localhost) ]]; then
    [[ $n == */* ]] || n=library/$n
    n=docker.io/$n
  fi
  echo "$n"
}

# import_tar NAME KEY ARCHIVE CHANGES...: podman/docker import of a root
# file system archive (ownership kept), labelled with its key.
import_tar() {
  local name=$1 key=$2 tar=$3; shift 3
  local changes=(--change "LABEL $STANDIN_LABEL=$key") c
  for c in "$@"; do changes+=(--change "$c"); done
  "$ENGINE" import "${changes[@]}" "$tar" "$(qualified "$name")" >/dev/null
  log "imported stand-in $name ($key)"
}

# build_containerfile NAME KEY DIR: builds DIR/Containerfile as NAME.
build_containerfile() {
  local name=$1 key=$2 dir=$3
  shift 3
  local args=(build --pull=never --label "$STANDIN_LABEL=$key" -t "$(qualified "$name")" -f "$dir/Containerfile" "$@")
  if [ "$ENGINE" = podman ]; then
    args+=(--format docker "${PODMAN_BUILD_MOUNTS[@]}")
  fi
  nice -n 10 "$ENGINE" "${args[@]}" "$dir" >&2
}

# The host's CA bundle (read-only, never baked in) and the Go caches,
# mounted into every RUN step of a Podman build.
PODMAN_BUILD_MOUNTS=(-v "$CA_BUNDLE:$CA_BUNDLE:ro"
  -v "$CACHE/image-build/gomod:/go/pkg/mod" -v "$CACHE/image-build/gobuild:/root/.cache/go-build")
mkdir -p "$CACHE/image-build/gomod" "$CACHE/image-build/gobuild"

# --- the compose file's other images: scripts/standins/NAME/Containerfile ---

# standin_recipe DIR NAME key|build KEY [BUILD ARGS...]: the stand-ins
# built from a Containerfile, keyed by its folder, the bases it uses and
# its build arguments.
standin_recipe() {
  local dir="$ROOT/scripts/standins/$1" name=$2 op=$3; shift 3
  case $op in
    key)
      { echo "recipe $STANDIN_RECIPE"; debian_key; standin_golang key; standin_distroless key; echo "$@"
        (cd "$dir" && tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - .); } | hash12 ;;
    build)
      local key=$1; shift
      local b
      for b in $(awk 'toupper($1) == "FROM" {print $2}' "$dir/Containerfile"); do
        [ "$b" = scratch ] || ensure_image "${b#docker.io/library/}"
      done
      build_containerfile "$name" "$key" "$dir" "$@"
      log "built stand-in $name ($key)"
      ;;
  esac
}

versitygw_version() { awk -F= '/^VERSITYGW_VERSION=/ {print $2}' "$ROOT/scripts/tools.sh"; }

standin_postgres() { standin_recipe postgres postgres:15 "$@"; }
standin_haproxy() { standin_recipe haproxy haproxy:2.8 "$@"; }
standin_busybox() { standin_recipe busybox busybox:1.36 "$@"; }
standin_versitygw() {
  local op=$1; shift
  standin_recipe versitygw versity/versitygw:latest "$op" "$@" --build-arg "VERSITYGW_VERSION=$(versitygw_version)"
}

# --- Debian bookworm: debootstrap minbase from the machine's own mirror ---

debian_mirror() {
  local m
  m=$(apt-cache policy 2>/dev/null | awk -v s="$DEBIAN_SUITE/main" '$3 == s {print $2; exit}')
  echo "${m:-http://deb.debian.org/debian}"
}

debian_key() {
  { echo "recipe $STANDIN_RECIPE"; debian_mirror; echo "$DEBIAN_SUITE minbase $DEBIAN_INCLUDE"; } | hash12
}

# debian_rootfs: prints the folder of the cached root file system.
debian_rootfs() {
  local key dir
  key=$(debian_key)
  dir="$IMAGES/debian-$DEBIAN_SUITE-$key"
  if [ ! -f "$dir/.done" ]; then
    apt_install debootstrap
    rm -rf "$dir" && mkdir -p "$dir"
    local mirror t0=$SECONDS
    mirror=$(debian_mirror)
    log "debootstrap $DEBIAN_SUITE (minbase + $DEBIAN_INCLUDE) from $mirror (once per key $key)"
    nice -n 10 debootstrap --variant=minbase --include="$DEBIAN_INCLUDE" "$DEBIAN_SUITE" "$dir/rootfs" "$mirror" \
      >"$dir/debootstrap.log" 2>&1 || { tail -20 "$dir/debootstrap.log" >&2; die "debootstrap failed"; }
    rm -rf "$dir/rootfs/var/cache/apt/archives/"*.deb "$dir/rootfs/var/lib/apt/lists/"*
    log "debootstrap took $((SECONDS - t0)) s"
    touch "$dir/.done"
  fi
  echo "$dir/rootfs"
}

standin_debian() {
  case $1 in
    key) debian_key ;;
    build)
      local root tar="$IMAGES/debian-$DEBIAN_SUITE-$2.tar"
      root=$(debian_rootfs)
      [ -f "$tar" ] || { tar --numeric-owner -C "$root" -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"; }
      import_tar debian:bookworm "$2" "$tar" \
        'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' 'CMD ["bash"]'
      ;;
  esac
}

# --- golang:1.26-bookworm: Debian + the Go toolchain of go.mod ---

go_version() { # the toolchain go.mod asks for
  local v
  v=$(cd "$ROOT" && go mod edit -json | python3 -c 'import json,sys;d=json.load(sys.stdin);print((d.get("Toolchain") or "go"+d["Go"]).removeprefix("go"))')
  echo "$v"
}

standin_golang() {
  local gov; gov=$(go_version)
  case $1 in
    key) { echo "recipe $STANDIN_RECIPE"; debian_key; echo "go$gov linux-amd64"; } | hash12 ;;
    build)
      local key=$2 root stage="$IMAGES/golang-$2" tar="$IMAGES/golang-$2.tar"
      if [ ! -f "$tar" ]; then
        root=$(debian_rootfs)
        log "golang stand-in: Go $gov from the module proxy (golang.org/toolchain)"
        local dir
        dir=$(cd / && GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod download -json "golang.org/toolchain@v0.0.1-go$gov.linux-amd64" |
          python3 -c 'import json,sys;print(json.load(sys.stdin)["Dir"])')
        rm -rf "$stage" && mkdir -p "$stage/usr/local" "$stage/go/src" "$stage/go/bin"
        cp -r "$dir" "$stage/usr/local/go"
        chmod -R u+w,go-w "$stage/usr/local/go"
        # Module zips carry no executable bits.
        chmod 0755 "$stage/usr/local/go/bin/"* "$stage/usr/local/go/pkg/tool/"*/*
        chmod -R 1777 "$stage/go"
        tar --numeric-owner -cf "$tar.tmp" -C "$root" . -C "$stage" ./usr/local/go ./go
        mv "$tar.tmp" "$tar"
        rm -rf "$stage"
      fi
      import_tar golang:1.26-bookworm "$key" "$tar" \
        'ENV PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        "ENV GOLANG_VERSION=$gov" 'ENV GOTOOLCHAIN=local' 'ENV GOPATH=/go' 'WORKDIR /go' 'CMD ["bash"]'
      ;;
  esac
}

# --- gcr.io/distroless/static-debian12:nonroot: what that image holds ---
# nonroot 65532 (passwd, group, home), Debian's CA bundle, zoneinfo,
# netbase's files, /tmp 1777; no shell, no package manager.

standin_distroless() {
  case $1 in
    key) { echo "recipe $STANDIN_RECIPE"; debian_key; echo distroless-static-nonroot; } | hash12 ;;
    build)
      local key=$2 root stage="$IMAGES/distroless-$2" tar="$IMAGES/distroless-$2.tar"
      if [ ! -f "$tar" ]; then
        root=$(debian_rootfs)
        rm -rf "$stage" && mkdir -p "$stage"/{etc/ssl/certs,usr/share,tmp,home/nonroot,root,var/lib/dpkg/status.d}
        cp "$root/etc/ssl/certs/ca-certificates.crt" "$stage/etc/ssl/certs/"
        cp -a "$root/usr/share/zoneinfo" "$stage/usr/share/"
        cp "$root/etc/services" "$root/etc/protocols" "$root/etc/rpc" "$root/etc/ethertypes" "$stage/etc/" 2>/dev/null ||
          cp "$root/etc/services" "$root/etc/protocols" "$stage/etc/"
        cat >"$stage/etc/passwd" <<'EOT'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOT
        cat >"$stage/etc/group" <<'EOT'
root:x:0:
nobody:x:65534:
tty:x:5:
staff:x:50:
nonroot:x:65532:
EOT
        echo 'hosts: files dns' >"$stage/etc/nsswitch.conf"
        printf 'PRETTY_NAME="Distroless (darkroom stand-in)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\n' >"$stage/etc/os-release"
        chmod 1777 "$stage/tmp"
        chmod 0700 "$stage/root" "$stage/home/nonroot"
        chown 65532:65532 "$stage/home/nonroot"
        tar --numeric-owner -C "$stage" -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
        rm -rf "$stage"
      fi
      import_tar gcr.io/distroless/static-debian12:nonroot "$key" "$tar" \
        'USER 65532' 'WORKDIR /home/nonroot' \
        'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt'
      ;;
  esac
}
