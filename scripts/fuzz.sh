#!/usr/bin/env bash
# Runs every Go fuzz target in the repository (found by grepping test files
# for `func FuzzX(`, so targets added on any branch are picked up) for
# FUZZTIME each (default 30s), one target at a time. The seed corpora
# (testdata/fuzz/...) run with every plain `go test` as well.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-30s}"

mapfile -t targets < <(git ls-files '*_test.go' | xargs grep -H '^func Fuzz[A-Za-z0-9_]*(' |
  sed 's/^\(.*\)\/[^/]*_test\.go:func \(Fuzz[A-Za-z0-9_]*\)(.*/\1 \2/' | sort -u)
if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz: no fuzz targets found" >&2
  exit 1
fi
for t in "${targets[@]}"; do
  read -r dir name <<<"$t"
  echo "fuzz: $name in ./$dir for $FUZZTIME"
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "./$dir"
done
echo "fuzz: ${#targets[@]} target(s) ran for $FUZZTIME each"
