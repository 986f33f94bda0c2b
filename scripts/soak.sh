#!/usr/bin/env bash
# make soak: TestSoak (cmd/darkroom/soak_test.go) for DARKROOM_SOAK
# (default 20m): three replicas behind HAProxy on a PostgreSQL of the
# test's own, the test S3 server behind the test's proxy, the provider
# emulator, mixed load and one fault a minute. The report (soak.csv, one
# line a minute; soak.png, the chart) goes to DARKROOM_SOAK_REPORT
# (default a new folder under ${TMPDIR:-/tmp}), printed at the start and
# the end. Not part of make test or CI (which run the 2-minute version
# inside go test). Servers started here are stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

export DARKROOM_SOAK="${DARKROOM_SOAK:-20m}"
report="${DARKROOM_SOAK_REPORT:-$(mktemp -d "${TMPDIR:-/tmp}/darkroom-soak-XXXXXX")}"
mkdir -p "$report"
export DARKROOM_SOAK_REPORT="$report"
echo "soak: $DARKROOM_SOAK; report in $report"

# Servers of its own (stopped on exit), never ones the caller runs: the
# soak starts a PostgreSQL of its own as well, for its restarts; this one
# only tells it PostgreSQL is installed.
export DARKROOM_PG_STATE="${TMPDIR:-/tmp}/darkroom-soak-pg-$$"
export DARKROOM_S3_STATE="${TMPDIR:-/tmp}/darkroom-soak-s3-$$"
trap 'scripts/s3-test-server.sh stop; scripts/pg-test-server.sh stop' EXIT
# shellcheck disable=SC1090
source "$(scripts/s3-test-server.sh start)"
# shellcheck disable=SC1090
source "$(scripts/pg-test-server.sh start)"
scripts/haproxy.sh install
export DARKROOM_TEST_REQUIRE_PG=1

# The test's timeout: the soak, its drain (up to 2 minutes) and margin.
minutes=120
case "$DARKROOM_SOAK" in *m) [[ ${DARKROOM_SOAK%m} =~ ^[0-9]+$ ]] && minutes=$(( ${DARKROOM_SOAK%m} + 15 )) ;; esac
set +e
go test -count=1 -timeout "${minutes}m" -run '^TestSoak$' -v ./cmd/darkroom/ >"$report/soak.log" 2>&1
status=$?
set -e
grep -E '^(--- |PASS|FAIL|ok)|soak_test.go' "$report/soak.log" || true
echo "soak: report in $report (soak.csv, soak.png, soak.log)"
exit "$status"
