#!/usr/bin/env bash
# The whole test suite: starts the real servers the integration tests use
# (versitygw for S3, PostgreSQL), runs go test -race over everything, the
# provider emulator's own tests (go's ./... skips testdata), the release
# build checked (scripts/release-check.sh), every fuzz
# target for FUZZTIME (default 30s) each, the Dockerfile lint with the
# static build it makes, the image built by a container engine and checked
# running (scripts/image.sh test), the compose fleet through HAProxy
# (scripts/fleet.sh test), then the MCP conformance suite; the end-to-end
# suite runs on both engines. Every
# server is stopped by PID on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

env_file=$(scripts/s3-test-server.sh start)
trap 'scripts/s3-test-server.sh stop; scripts/pg-test-server.sh stop' EXIT
# shellcheck disable=SC1090
source "$env_file"
pg_env=$(scripts/pg-test-server.sh start)
# shellcheck disable=SC1090
source "$pg_env"
export DARKROOM_TEST_REQUIRE_PG=1 # the PostgreSQL engine's tests must run, not skip
# The viewer's browser test needs Chromium: installed here, then it must run, not skip.
scripts/viewer.sh chromium >/dev/null && export DARKROOM_TEST_REQUIRE_BROWSER=1
export DARKROOM_TEST_REQUIRE_CLIENTS=1 # so must the real-client matrix (TestRealClients)
scripts/clients.sh >/dev/null # installs Node 22 and the pinned clients, cached

go test -race -count=1 -timeout 40m ./... ./testdata/emulator/...
# The end-to-end suite and the client acceptance tests again on the
# PostgreSQL engine (the client matrix
# tests the wire, not the engine: it ran above).
DARKROOM_TEST_ENGINE=postgres go test -race -count=1 -timeout 30m -skip TestRealClients ./cmd/darkroom/ ./client/
scripts/release-check.sh # make release (every platform, the bundle, sums, server.json), mcpb validate, the bundle started as a host would
scripts/fuzz.sh
scripts/dockerlint.sh
scripts/image.sh test # make image-test: the real Dockerfile, built and run
scripts/fleet.sh test # make fleet-test: deploy/compose.yaml, up and through HAProxy
scripts/conformance.sh
