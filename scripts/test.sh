#!/usr/bin/env bash
# The whole test suite: starts the real servers the integration tests use
# (versitygw for S3), runs go test -race over everything, then the
# conformance suite. Every server is stopped by PID on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/tools.sh versitygw
env_file=$(scripts/s3-test-server.sh start)
trap 'scripts/s3-test-server.sh stop' EXIT
# shellcheck disable=SC1090
source "$env_file"
export DARKROOM_TEST_VERSITYGW="$HOME/.cache/darkroom/bin/versitygw"

go test -race -count=1 -timeout 20m ./...

if [ -x scripts/conformance.sh ]; then
  scripts/conformance.sh
fi
