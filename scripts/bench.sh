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
trap 'scripts/pg-test-server.sh stop' EXIT
# shellcheck disable=SC1090
source "$(scripts/pg-test-server.sh start)"
export DARKROOM_TEST_REQUIRE_PG=1

go test -run '^$' -bench "${BENCH:-.}" -benchtime 1x -count 1 ./... | grep -v '^ok\|no test files'
