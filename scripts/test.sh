#!/usr/bin/env bash
# make test's run, after vet and with the rig up: every suite, the ones that
# can share the machine at the same time, each stage's output printed whole
# when it ends, then a table of the stages and the ten slowest tests.
#
# The stages:
#   module    the test module (test/: end-to-end, deploy checks, harness)
#   unit      the root module's tests, the discard build's, the decoder fuzz
#   compat    the compatibility set on the other PostgreSQL versions
#             (scripts/compat.sh, COMPAT_TESTS and PG_OTHERS from make),
#             then the Kafka compatibility set on the older Kafka
#             (scripts/compat-kafka.sh, KAFKA_COMPAT_TESTS and
#             KAFKA_COMPAT_VERSION from make); either failing fails it
#   faults    the fault-injection suite, on services of its own
#             (scripts/faults.sh), so that its outages hit nobody else
# module and unit run together against the rig; faults beside them when it
# has services of its own (scripts/faults.sh) and WALRELAY_FAULTS_ALONGSIDE
# is 1 (the default), else last, alone; compat as soon as module and unit
# ended (beside faults, the longest stage), or beside them from the start
# with WALRELAY_COMPAT_ALONGSIDE=1.
# Exit status 1 if any stage failed.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
GO="${GO:-go}"
FUZZTIME="${FUZZTIME:-300000x}"
COMPAT_TESTS="${COMPAT_TESTS:?set by make}"
PG_OTHERS="${PG_OTHERS:?set by make}"
KAFKA_COMPAT_TESTS="${KAFKA_COMPAT_TESTS:?set by make}"
KAFKA_COMPAT_VERSION="${KAFKA_COMPAT_VERSION:?set by make}"
ALONGSIDE="${WALRELAY_FAULTS_ALONGSIDE:-1}"
# The compat set beside the main suites is WALRELAY_COMPAT_ALONGSIDE=1; by
# default (0) it waits for them, so that its failover tests never share the
# two cores with more than the fault suite.
COMPAT_ALONGSIDE="${WALRELAY_COMPAT_ALONGSIDE:-0}"
# The fault suite kills, pauses and restarts services: beside the others only
# on a rig of its own (scripts/faults.sh), else alone, after them, on the
# rig's. WALRELAY_FAULTS_ALONGSIDE=0 runs it last on its own rig anyway (a
# quieter machine for its timing bounds).
[ -x scripts/faults.sh ] || ALONGSIDE=0

export WALRELAY_TEST_REPORT_DIR="$REPO/.rig/test-report"
rm -rf "$WALRELAY_TEST_REPORT_DIR"
mkdir -p "$WALRELAY_TEST_REPORT_DIR/stages"
STAGES="$WALRELAY_TEST_REPORT_DIR/stages"
# The report tool, built afresh once for the run's concurrent stages.
mkdir -p .rig/bin
(cd test && "$GO" build -o ../.rig/bin/testreport ./testreport)

eval "$(scripts/rig.sh env)"

module() {
  cd test || return 1
  "$REPO/scripts/gotest.sh" module -race -count=1 -parallel 4 -timeout 20m ./...
}
# A stage's function runs where errexit does not apply (its status is
# tested): each step must pass on its own, and all of them run.
unit() {
  local rc=0
  "$REPO/scripts/gotest.sh" unit -race -count=1 -parallel 4 -timeout 20m ./... || rc=1
  "$REPO/scripts/gotest.sh" discard -count=1 -tags walrelay_discard -run Discard ./cmd/walrelay || rc=1
  "$GO" test -run '^$' -fuzz FuzzDecode -fuzztime "$FUZZTIME" ./decoder || rc=1
  return "$rc"
}
# The PostgreSQL versions, then the Kafka version: one after the other, so
# that the stage never runs more than compat.sh's two servers at once.
compat() {
  local rc=0
  # shellcheck disable=SC2086 # a list of versions
  scripts/compat.sh "$COMPAT_TESTS" $PG_OTHERS || rc=1
  # shellcheck disable=SC2086 # a list of versions
  scripts/compat-kafka.sh "$KAFKA_COMPAT_TESTS" $KAFKA_COMPAT_VERSION || rc=1
  return "$rc"
}
faults() {
  if [ -x scripts/faults.sh ]; then
    scripts/faults.sh
  else
    cd test || return 1
    "$REPO/scripts/gotest.sh" faults -v -tags faults -race -count=1 -p 1 -timeout 40m ./faults
  fi
}

# stage NAME runs the function NAME in the background, its output in
# $STAGES/NAME.log, its status and seconds in $STAGES/NAME.rc and .secs.
pids=()
names=()
stage() {
  local name="$1"
  (
    start=$SECONDS
    rc=0
    ("$name") >"$STAGES/$name.log" 2>&1 || rc=$?
    echo "$rc" >"$STAGES/$name.rc"
    echo "$((SECONDS - start))" >"$STAGES/$name.secs"
  ) &
  pids+=("$!")
  names+=("$name")
  echo "test.sh: $name started"
}
# finish [NAME...] waits for the stages named (every stage started so far
# when none is), printing each when it ends.
finish() {
  local i left_pids=() left_names=()
  for i in "${!pids[@]}"; do
    if [ "$#" -gt 0 ] && [[ " $* " != *" ${names[$i]} "* ]]; then
      left_pids+=("${pids[$i]}")
      left_names+=("${names[$i]}")
      continue
    fi
    wait "${pids[$i]}" || true
    echo "=== stage ${names[$i]}: exit $(cat "$STAGES/${names[$i]}.rc") after $(cat "$STAGES/${names[$i]}.secs") s"
    cat "$STAGES/${names[$i]}.log"
    echo "=== end of stage ${names[$i]}"
  done
  pids=("${left_pids[@]}")
  names=("${left_names[@]}")
}

began=$SECONDS
stage module
stage unit
if [ "$COMPAT_ALONGSIDE" = 1 ]; then
  stage compat
fi
if [ "$ALONGSIDE" = 1 ]; then
  stage faults
fi
finish module unit
if [ "$COMPAT_ALONGSIDE" != 1 ]; then
  stage compat
fi
finish
if [ "$ALONGSIDE" != 1 ]; then
  stage faults
  finish
fi

failed=0
echo
echo "Stages (wall $((SECONDS - began)) s):"
for f in "$STAGES"/*.rc; do
  name="$(basename "$f" .rc)"
  rc="$(cat "$f")"
  printf '  %-8s %5s s  %s\n' "$name" "$(cat "$STAGES/$name.secs")" "$([ "$rc" = 0 ] && echo ok || echo "FAILED (exit $rc)")"
  [ "$rc" = 0 ] || failed=1
done
echo
.rig/bin/testreport slowest 10 "$WALRELAY_TEST_REPORT_DIR"/*.json || failed=1
if [ "$failed" != 0 ]; then
  echo "test.sh: FAILED" >&2
  exit 1
fi
echo "test.sh: every stage passed"
