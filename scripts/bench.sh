#!/usr/bin/env bash
# make bench: every benchmark once (-benchtime 1x), each reporting its own
# figures and ratios. PostgreSQL's (the replicas' wake-up, the durable
# create against an INSERT loop, per-operation costs against SQLite) need
# the test PostgreSQL, started here as test.sh does and stopped on exit;
# the durable-create benchmark starts one of its own with fsync on.
set -euo pipefail
cd "$(dirname "$0")/.."

# A server of its own (stopped on exit), never one the caller runs.
export DARKROOM_PG_STATE="${TMPDIR:-/tmp}/darkroom-bench-pg-$$"
before_dir="$(mktemp -d)"
trap 'scripts/pg-test-server.sh stop; rm -rf "$before_dir"' EXIT

# BenchmarkPollPaths runs an earlier revision's darkroom beside this one,
# before and after in one run: BENCH_BEFORE (default 4bd90a1, the edge
# before it became one engine; empty: none), when this clone has it.
before="${BENCH_BEFORE-4bd90a1}"
if [ -n "$before" ] && git rev-parse -q --verify "$before^{commit}" >/dev/null; then
	git archive "$before" | tar -x -C "$before_dir"
	(cd "$before_dir" && go test -c -o "$before_dir/before.test" ./cmd/darkroom)
	export DARKROOM_BENCH_BEFORE="$before_dir/before.test"
fi
# shellcheck disable=SC1090
source "$(scripts/pg-test-server.sh start)"
export DARKROOM_TEST_REQUIRE_PG=1

go test -v -run '^$' -bench "${BENCH:-.}" -benchtime 1x -count 1 ./... | grep -v '^ok\|no test files'
