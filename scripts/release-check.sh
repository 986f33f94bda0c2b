#!/usr/bin/env bash
# The release build, checked as CI runs it (part of scripts/test.sh),
# without publishing anything:
#   1. make release: every platform's static binary, the MCP Bundle,
#      SHA256SUMS, server.json and the Docker catalog's files in dist/;
#   2. the Linux binary it made runs and says its version;
#   3. sha256sum -c agrees with SHA256SUMS;
#   4. the real bundle tool (@anthropic-ai/mcpb, pinned in scripts/tools.sh)
#      validates the bundle's manifest and reads the bundle (mcpb info);
#   5. TestBundle unpacks that bundle, starts it as a host would and
#      completes a generation over stdio, and checks dist/server.json
#      against the registry's schema and the bundle's version and digest.
# Prints how long the release build took and the bundle's size.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${DARKROOM_CACHE:-$HOME/.cache/darkroom}"
DIST=${DIST:-dist}
log() { echo "release-check: $*" >&2; }

scripts/tools.sh mcpb
rm -rf "$DIST"
t0=$SECONDS
make --no-print-directory release DIST="$DIST" >&2
log "make release took $((SECONDS - t0)) s"
version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$DIST/server.json" | head -1)
bundle="$DIST/darkroom-$version.mcpb"
[ -f "$bundle" ] || { log "no $bundle"; exit 1; }
log "bundle $(basename "$bundle"): $(stat -c %s "$bundle") bytes"

arch=$(go env GOARCH)
got=$("$DIST/darkroom-$version-linux-$arch" version)
[ "$got" = "darkroom $version" ] || { log "darkroom version says \"$got\", want \"darkroom $version\""; exit 1; }
log "$got"
(cd "$DIST" && sha256sum --quiet -c SHA256SUMS)

mcpb() { "$CACHE/bin/node22" "$CACHE/bin/mcpb.js" "$@"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mcpb unpack "$bundle" "$tmp/unpacked" >/dev/null
mcpb validate "$tmp/unpacked/manifest.json"
mcpb info "$bundle"

DARKROOM_BUNDLE=$PWD/$bundle go test -race -count=1 -run 'TestBundle' ./cmd/darkroom-release/
