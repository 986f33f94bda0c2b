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
# A failure is a failing input, which go test writes to
# testdata/fuzz/<target>/. Go 1.26's coordinator can also end a clean run
# at its deadline with a bare "context deadline exceeded" and no input
# written (go.dev/issue/75804, fixed in Go 1.27): that alone is reported,
# not failed.
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
for t in "${targets[@]}"; do
  read -r dir name <<<"$t"
  corpus="$dir/testdata/fuzz/$name"
  before="$(ls "$corpus" 2>/dev/null | sort || true)"
  echo "fuzz: $name in ./$dir for $FUZZTIME"
  status=0
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "./$dir" 2>&1 | tee "$out" || status=$?
  [ "$status" -eq 0 ] && continue
  after="$(ls "$corpus" 2>/dev/null | sort || true)"
  if [ "$before" = "$after" ] && grep -q '^    context deadline exceeded$' "$out" &&
    [ "$(grep -c '^--- FAIL' "$out")" -eq 1 ]; then
    echo "fuzz: $name: the deadline race of go.dev/issue/75804, no failing input written: not a failure"
    continue
  fi
  echo "fuzz: $name failed; a failing input, if any, is in $corpus" >&2
  exit 1
done
echo "fuzz: ${#targets[@]} target(s) ran for $FUZZTIME each"
