#!/usr/bin/env bash
# One `go test` of make test's, its events kept for the run's report.
#
#   scripts/gotest.sh NAME [-v] GO_TEST_ARGS...
#
# runs `go test -json GO_TEST_ARGS...` in the current directory and prints
# what a plain go test prints (test/testreport: the packages' closing lines,
# build errors, the whole output of a failed or skipped test; with -v every
# test's output), the events in $WALRELAY_TEST_REPORT_DIR/NAME.json (default
# <repo>/.rig/test-report) for `testreport slowest`. Exits as go test does.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GO="${GO:-go}"
[ "$#" -ge 1 ] || { echo "usage: $0 NAME [-v] GO_TEST_ARGS..." >&2; exit 2; }
name="$1"
shift
verbose=()
if [ "${1:-}" = -v ]; then
  verbose=(-v)
  shift
fi
dir="${WALRELAY_TEST_REPORT_DIR:-$REPO/.rig/test-report}"
tool="$REPO/.rig/bin/testreport"
if [ ! -x "$tool" ]; then
  mkdir -p "$(dirname "$tool")"
  (cd "$REPO/test" && "$GO" build -o "$tool.$$" ./testreport && mv "$tool.$$" "$tool")
fi
"$GO" test -json "$@" | "$tool" filter "${verbose[@]}" "$dir/$name.json"
