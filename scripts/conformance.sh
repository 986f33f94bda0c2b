#!/usr/bin/env bash
# Runs the official MCP conformance suite (pinned in scripts/tools.sh)
# against cmd/darkroom-conformance: every tasks-* scenario one by one, then
# every scenario the 2026-07-28 revision requires (plus the extension and
# pending ones it reports); then against a real `darkroom serve` (embedded
# defaults, a temporary data directory, local provider at latency 0) for
# the scenarios that need no fixture tools, prompts or resources (see
# SERVE_SCENARIOS). The tasks-* scenarios also run through HAProxy against
# three fixture servers on one PostgreSQL database. Exits non-zero if any check fails, scored or not.
#
# CONFORMANCE_OUT=DIR keeps the suite's per-scenario results in DIR
# (default: a temporary directory, removed on exit).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/tools.sh conformance
CACHE="${DARKROOM_CACHE:-$HOME/.cache/darkroom}"
NODE="$CACHE/bin/node22"
VERSION=$(sed -n 's/^CONFORMANCE_VERSION=//p' scripts/tools.sh)
SUITE="$CACHE/conformance-$VERSION/node_modules/@modelcontextprotocol/conformance/dist/index.js"

tmp=$(mktemp -d)
pid=""
serve_pid=""
cleanup() {
  for p in $pid $serve_pid; do
    kill "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

out="${CONFORMANCE_OUT:-$tmp/out}"
mkdir -p "$tmp/data" "$tmp/serve-data" "$tmp/home" "$out"

go build -o "$tmp/darkroom-conformance" ./cmd/darkroom-conformance
go build -o "$tmp/darkroom" ./cmd/darkroom

# The server prints "listening on http://ADDR/mcp" on stdout once ready.
mkfifo "$tmp/ready"
"$tmp/darkroom-conformance" -addr 127.0.0.1:0 -data "$tmp/data" >"$tmp/ready" 2>"$tmp/server.log" &
pid=$!
exec 3<>"$tmp/ready" # read-write: never blocks, and the server never meets a closed pipe
url=""
for _ in $(seq 60); do
  if read -r -t 1 -u 3 line; then
    case $line in "listening on "*) url=${line#listening on }; break ;; esac
  elif ! kill -0 "$pid" 2>/dev/null; then
    break
  fi
done
if [ -z "$url" ]; then
  echo "conformance: the fixture server did not start" >&2
  cat "$tmp/server.log" >&2
  exit 1
fi

suite() { HOME="$tmp/home" NO_COLOR=1 FORCE_COLOR=0 "$NODE" "$SUITE" "$@"; }
plain() { sed 's/\x1b\[[0-9;]*m//g' "$1"; }
# problems DIR prints the failed and warning checks recorded under DIR.
problems() {
  "$NODE" -e '
    const fs = require("fs"), path = require("path");
    for (const d of fs.readdirSync(process.argv[1]).sort()) {
      let checks;
      try { checks = JSON.parse(fs.readFileSync(path.join(process.argv[1], d, "checks.json"), "utf8")); } catch { continue; }
      const name = d.replace(/^server-/, "").replace(/-\d{4}-\d\d-\d\dT.*$/, "");
      for (const c of checks)
        if (c.status === "FAILURE" || c.status === "WARNING")
          console.log(`    ${name}: ${c.status} ${c.id}: ${(c.errorMessage || "").slice(0, 300)}`);
    }' "$1"
}

failed=0
summary=()

# (a) Each tasks-* extension scenario on its own.
mapfile -t scenarios < <(suite list --server | sed -n 's/^ *- \(tasks-[^ ]*\).*/\1/p')
if [ ${#scenarios[@]} -eq 0 ]; then
  echo "conformance: the suite lists no tasks-* scenarios" >&2
  exit 1
fi
for s in "${scenarios[@]}"; do
  log="$tmp/$s.log"
  rc=0
  suite server --url "$url" --scenario "$s" -o "$out/$s" >"$log" 2>&1 || rc=$?
  counts=$(plain "$log" | sed -n 's/^Passed: \(.*\)/\1/p' | tail -n1)
  if [ $rc -ne 0 ]; then
    failed=1
    summary+=("FAIL $s: ${counts:-no result (exit $rc)}")
    [ -n "$counts" ] || summary+=("$(plain "$log" | tail -n5)")
  else
    summary+=("ok   $s: ${counts:-skipped}")
  fi
  details=$(problems "$out/$s")
  [ -z "$details" ] || summary+=("$details")
done

# (a') The tasks-* scenarios again through HAProxy (round-robin, no
# stickiness: scripts/haproxy.sh) in front of three fixture servers on one
# fresh PostgreSQL database, so consecutive requests of a scenario land on
# different replicas. PostgreSQL is the test server test.sh starts
# (DARKROOM_TEST_DATABASE_URL), else this script starts its own.
if [ -z "${DARKROOM_TEST_DATABASE_URL:-}" ]; then
  # Not under $tmp: the server runs as the postgres user, who must reach it.
  export DARKROOM_PG_STATE="${TMPDIR:-/tmp}/darkroom-conformance-pg-$$"
  # shellcheck disable=SC1090
  source "$(scripts/pg-test-server.sh start)"
  own_pg=1
fi
fleet_db="darkroom_conformance_$RANDOM$RANDOM"
"$DARKROOM_TEST_PG_BIN/createdb" --maintenance-db="$DARKROOM_TEST_DATABASE_URL" "$fleet_db"
fleet_url=$(sed "s#/[^/?]*?#/$fleet_db?#" <<<"$DARKROOM_TEST_DATABASE_URL")
fleet_pids=""
fleet_cleanup() {
  scripts/haproxy.sh stop "$tmp/haproxy" || true
  for p in $fleet_pids; do
    kill "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  "$DARKROOM_TEST_PG_BIN/dropdb" --force --maintenance-db="$DARKROOM_TEST_DATABASE_URL" "$fleet_db" 2>/dev/null || true
  [ -z "${own_pg:-}" ] || scripts/pg-test-server.sh stop
}
trap 'fleet_cleanup; cleanup' EXIT
backends=()
for i in 0 1 2; do
  "$tmp/darkroom-conformance" -addr 127.0.0.1:0 -database-url "$fleet_url" >"$tmp/fleet-$i.out" 2>"$tmp/fleet-$i.log" &
  fleet_pids="$fleet_pids $!"
  addr=""
  for _ in $(seq 120); do
    addr=$(sed -n 's#^listening on http://\([^/]*\)/mcp$#\1#p' "$tmp/fleet-$i.out" | head -n1)
    [ -z "$addr" ] || break
    read -r -t 0.25 -u 3 _ || true # a quarter second (fd 3 never has data)
  done
  if [ -z "$addr" ]; then
    echo "conformance: fixture replica $i on PostgreSQL did not start" >&2
    cat "$tmp/fleet-$i.log" >&2
    exit 1
  fi
  backends+=("$addr")
done
lb=$(scripts/haproxy.sh start "$tmp/haproxy" "${backends[@]}")
for s in "${scenarios[@]}"; do
  log="$tmp/fleet-$s.log"
  rc=0
  suite server --url "http://$lb/mcp" --scenario "$s" -o "$out/fleet-$s" >"$log" 2>&1 || rc=$?
  counts=$(plain "$log" | sed -n 's/^Passed: \(.*\)/\1/p' | tail -n1)
  if [ $rc -ne 0 ]; then
    failed=1
    summary+=("FAIL 3 replicas $s: ${counts:-no result (exit $rc)}")
    [ -n "$counts" ] || summary+=("$(plain "$log" | tail -n5)")
  else
    summary+=("ok   3 replicas $s: ${counts:-skipped}")
  fi
  details=$(problems "$out/fleet-$s")
  [ -z "$details" ] || summary+=("$details")
done
# Every replica must have served: the scenarios ran across all three.
sessions=$(echo "show stat" | "$NODE" -e '
  const net = require("net"); const c = net.connect(process.argv[1]); let buf = "";
  c.on("data", d => buf += d); c.on("end", () => {
    const rows = buf.split("\n").filter(l => /^darkroom,r\d,/.test(l)).map(l => l.split(","));
    console.log(rows.map(r => r[1] + "=" + r[7]).join(" "));
  }); c.write("show stat\n");' "$tmp/haproxy/stats.sock")
summary+=("     requests per replica: $sessions")
if grep -qE '(^| )r[0-9]=0( |$)' <<<"$sessions" || [ -z "$sessions" ]; then
  failed=1
  summary+=("FAIL 3 replicas: a replica served nothing ($sessions)")
fi
fleet_cleanup
fleet_pids=""
trap cleanup EXIT

# (b) Everything 2026-07-28 requires, in one run.
log="$tmp/requirements.log"
rc=0
suite server --url "$url" --requirements 2026-07-28 -o "$out/requirements" >"$log" 2>&1 || rc=$?
total=$(plain "$log" | sed -n 's/^Total: \(.*\)/\1/p' | tail -n1)
bad=$(plain "$log" | sed -n '/^=== SUMMARY ===/,$p' | grep -E '^[^ ]+ [a-z0-9-]+: [0-9]+ passed, [1-9][0-9]* failed' || true)
if [ $rc -ne 0 ] || [ -z "$total" ] || [ -n "$bad" ]; then
  failed=1
  summary+=("FAIL requirements 2026-07-28: ${total:-no result (exit $rc)}")
  [ -n "$total" ] || summary+=("$(plain "$log" | tail -n5)")
else
  summary+=("ok   requirements 2026-07-28: $total")
fi
details=$(problems "$out/requirements")
[ -z "$details" ] || summary+=("$details")

# (c) darkroom serve itself: the scenarios that need no fixture (they list
# no test_* tool, prompt or resource; read from `list --server` and the
# scenarios' sources). A check may fail only for want of a fixture tool
# ("Not testable: server does not list the diagnostic tool ..."); every
# other FAILURE fails the run.
SERVE_SCENARIOS="server-initialize server-session-lifecycle server-stateless logging-set-level ping tools-list
  server-sse-polling server-sse-multiple-streams dns-rebinding-protection http-header-validation
  sep-2164-resource-not-found input-required-result-unsupported-methods"
DARKROOM_ADDR=127.0.0.1:0 DARKROOM_DATA_DIR="$tmp/serve-data" DARKROOM_LOCAL_LATENCY=0 \
  "$tmp/darkroom" serve 2>"$tmp/serve.log" &
serve_pid=$!
serve_url=""
for _ in $(seq 120); do
  serve_url=$(sed -n 's/.*"msg":"darkroom serving".*"addr":"\([^"]*\)".*/\1/p' "$tmp/serve.log" | head -n1)
  [ -z "$serve_url" ] || break
  kill -0 "$serve_pid" 2>/dev/null || break
  read -r -t 0.5 -u 3 _ || true # wait half a second (fd 3 never has data)
done
if [ -z "$serve_url" ]; then
  echo "conformance: darkroom serve did not start" >&2
  cat "$tmp/serve.log" >&2
  exit 1
fi
listed=$(suite list --server)
for s in $SERVE_SCENARIOS; do
  if ! grep -q -- "- $s " <<<"$listed"; then
    failed=1
    summary+=("FAIL serve $s: the suite no longer lists this scenario")
    continue
  fi
  log="$tmp/serve-$s.log"
  rc=0
  suite server --url "$serve_url" --scenario "$s" -o "$out/serve-$s" >"$log" 2>&1 || rc=$?
  verdict=$("$NODE" -e '
    const fs = require("fs"), path = require("path");
    let bad = 0, fixture = 0, ok = 0, runs = 0;
    for (const d of fs.readdirSync(process.argv[1])) {
      let checks;
      try { checks = JSON.parse(fs.readFileSync(path.join(process.argv[1], d, "checks.json"), "utf8")); } catch { continue; }
      runs++;
      for (const c of checks) {
        if (c.status !== "FAILURE") { ok++; continue; }
        if ((c.errorMessage || "").startsWith("Not testable: server does not list the diagnostic tool")) fixture++;
        else bad++;
      }
    }
    console.log(runs === 0 ? "none" : bad > 0 ? `bad ${bad} failed, ${ok} ok` : `ok ${ok} ok, ${fixture} need a fixture tool`);' "$out/serve-$s")
  case $verdict in
    ok*) summary+=("ok   serve $s: ${verdict#ok }") ;;
    *) failed=1; summary+=("FAIL serve $s: ${verdict#bad } (exit $rc)") ;;
  esac
  details=$(problems "$out/serve-$s" | grep -v 'Not testable: server does not list the diagnostic tool' || true)
  [ -z "$details" ] || summary+=("$details")
done

echo "conformance $VERSION against $url:"
printf '%s\n' "${summary[@]}" | sed 's/^/  /'
[ $failed -eq 0 ] || echo "conformance: FAILED${CONFORMANCE_OUT:+ (results in $CONFORMANCE_OUT)}" >&2
exit $failed
