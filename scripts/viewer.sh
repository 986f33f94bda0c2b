#!/usr/bin/env bash
# The MCP Apps view's build and browser-test prerequisites, cached under
# $HOME/.cache/darkroom so a second run is fast and prints only the result.
#   scripts/viewer.sh deps      npm ci of web/viewer's lockfile, once per lockfile; prints node_modules
#   scripts/viewer.sh build     rebuilds ui/viewer.html from web/viewer/src
#   scripts/viewer.sh check     fails when the committed ui/viewer.html is not what build makes
#   scripts/viewer.sh host OUT  builds the browser test's host page (testdata/apphost) into OUT
#   scripts/viewer.sh chromium  installs Debian's chromium if missing; prints its path
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${DARKROOM_CACHE:-$HOME/.cache/darkroom}"

deps() {
  local sum dir
  sum=$(cat web/viewer/package.json web/viewer/package-lock.json | sha256sum | cut -c1-16)
  dir="$CACHE/viewer-npm-$sum"
  if [ ! -f "$dir/.done" ]; then
    echo "viewer: installing npm packages (once per lockfile)" >&2
    rm -rf "$dir" && mkdir -p "$dir"
    cp web/viewer/package.json web/viewer/package-lock.json "$dir/"
    (cd "$dir" && npm ci --no-audit --no-fund >&2)
    touch "$dir/.done"
  fi
  echo "$dir/node_modules"
}

node_bin() { # Node 22 from tools.sh, else the system's
  if scripts/tools.sh node >&2 && [ -x "$CACHE/bin/node22" ]; then echo "$CACHE/bin/node22"; else command -v node; fi
}

case ${1:-} in
  deps) deps ;;
  build)
    nm=$(deps)
    NODE_MODULES="$nm" "$(node_bin)" web/viewer/build.mjs ;;
  host)
    nm=$(deps)
    NODE_MODULES="$nm" "$(node_bin)" web/viewer/build.mjs host "${2:?output file}" ;;
  check)
    nm=$(deps)
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    NODE_MODULES="$nm" "$(node_bin)" web/viewer/build.mjs "$tmp/viewer.html" 2>/dev/null
    if ! cmp -s "$tmp/viewer.html" ui/viewer.html; then
      echo "ui/viewer.html is stale: run make generate" >&2; exit 1
    fi ;;
  chromium)
    for c in chromium chromium-browser; do
      if command -v "$c" >/dev/null; then command -v "$c"; exit 0; fi
    done
    echo "viewer: installing Debian's chromium" >&2
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends chromium >&2
    command -v chromium ;;
  *) echo "usage: scripts/viewer.sh deps|build|check|host OUT|chromium" >&2; exit 2 ;;
esac
