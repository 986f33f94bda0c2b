#!/usr/bin/env bash
# Checks the Docker image build without a Docker engine:
#  1. lints Dockerfile with tools/dockerlint (BuildKit's `docker build --check`
#     rules, offline), built once and cached under $HOME/.cache/darkroom/bin;
#  2. checks deploy/haproxy.cfg (haproxy -c) and parses deploy/compose.yaml;
#  3. builds the binary exactly as the Dockerfile does and checks that it is
#     statically linked (no PT_INTERP) and runs.
# Usage: scripts/dockerlint.sh   (exit 1 on lint findings)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${DARKROOM_CACHE:-$HOME/.cache/darkroom}/bin"
mkdir -p "$BIN"

hash=$({ go version; cat tools/dockerlint/go.mod tools/dockerlint/go.sum tools/dockerlint/main.go; } | sha256sum | cut -c1-12)
lint="$BIN/dockerlint-$hash"
if [ ! -x "$lint" ]; then
  echo "dockerlint: building linter $hash (once per change)" >&2
  (cd tools/dockerlint && go build -trimpath -o "$lint.tmp" . && mv "$lint.tmp" "$lint")
fi
"$lint" Dockerfile

# deploy/: the load balancer's config must be valid HAProxy, and the
# compose file valid YAML naming the services README describes.
scripts/haproxy.sh install
haproxy -q -c -f deploy/haproxy.cfg
if python3 -c 'import yaml' 2>/dev/null; then
  python3 - <<'PY'
import yaml
d = yaml.safe_load(open("deploy/compose.yaml"))
want = {"darkroom1", "darkroom2", "darkroom3", "haproxy", "postgres", "s3"}
missing = want - set(d["services"])
assert not missing, f"deploy/compose.yaml lacks services {missing}"
for n in ("darkroom1", "darkroom2", "darkroom3"):
    env = d["services"][n]["environment"]
    for k in ("DARKROOM_DATABASE_URL", "DARKROOM_S3_BUCKET", "DARKROOM_TRUSTED_PROXIES", "DARKROOM_LOCAL_DIR"):
        assert k in env, f"{n} lacks {k}"
print("dockerlint: deploy/compose.yaml and deploy/haproxy.cfg OK")
PY
else
  echo "dockerlint: no python3 yaml module: deploy/compose.yaml not parsed (haproxy.cfg checked)" >&2
fi

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$tmp/darkroom" ./cmd/darkroom
if command -v readelf >/dev/null; then hdrs=$(readelf -lW "$tmp/darkroom"); else hdrs=$(file "$tmp/darkroom"); fi
if [[ $hdrs == *INTERP* || $hdrs == *"dynamically linked"* ]]; then
  echo "dockerlint: the darkroom binary is dynamically linked (has PT_INTERP):" >&2; echo "$hdrs" >&2; exit 1
fi
echo "dockerlint: static binary OK: $("$tmp/darkroom" version)"
