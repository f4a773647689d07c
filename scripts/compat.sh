#!/usr/bin/env bash
# The compatibility set (the end-to-end tests that exercise what differs
# between PostgreSQL versions) on every other supported version, each on a
# cluster of its own beside the rig's, COMPAT_JOBS versions at a time, all
# against the rig's Kafka (every test has topics of its own).
#
#   scripts/compat.sh 'TEST_REGEX' 14 15 16 17
#
# Environment:
#   COMPAT_JOBS   versions run at once (default 2). The set mostly waits (a
#                 standby to catch up, a failover, a slot to sync): two at a
#                 time roughly halve the wall time on two cores; more begin to
#                 starve the timing of the failover tests.
#   GO            the go command (default go)
#
# Each version's cluster listens on 127.0.0.1:(25440 + version), below
# Linux's ephemeral port range (32768-60999): it starts while other suites
# run, whose client sockets and kernel-chosen test ports could hold any port
# in that range at that moment. It lives in
# $WALRELAY_RIG_DIR/pg-<version> and is removed afterwards. Each version's
# output is printed whole when it ends; the exit status is 1 if any failed.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RIG_DIR="${WALRELAY_RIG_DIR:-$REPO/.rig}"
GO="${GO:-go}"
JOBS="${COMPAT_JOBS:-2}"
[ "$#" -ge 2 ] || { echo "usage: $0 TEST_REGEX VERSION..." >&2; exit 2; }
TESTS="$1"
shift
cd "$REPO"

# one runs the set on version $1, its output in $RIG_DIR/compat-$1.log.
one() {
  local v="$1" log="$RIG_DIR/compat-$1.log" rc=0
  export PG_MAJOR="$v" WALRELAY_PG_DIR="$RIG_DIR/pg-$v" WALRELAY_PG_PORT="$((25440 + v))"
  {
    echo "=== PostgreSQL $v: compatibility set (127.0.0.1:$WALRELAY_PG_PORT)"
    if "$REPO/scripts/pg.sh" start; then
      eval "$("$REPO/scripts/rig.sh" env)"
      (cd test && "$REPO/scripts/gotest.sh" "compat-$v" -race -count=1 -timeout 10m -run "$TESTS" ./e2e ./pgserver) || rc=$?
    else
      rc=1
    fi
    "$REPO/scripts/pg.sh" stop --purge || true
    echo "=== PostgreSQL $v: exit $rc"
  } >"$log" 2>&1
  cat "$log"
  return "$rc"
}

failed=()
pids=()
vers=()
# wait_one waits for the oldest running version and records a failure.
wait_one() {
  local pid="${pids[0]}" v="${vers[0]}"
  pids=("${pids[@]:1}")
  vers=("${vers[@]:1}")
  wait "$pid" || failed+=("$v")
}
for v in "$@"; do
  [ "${#pids[@]}" -lt "$JOBS" ] || wait_one
  one "$v" &
  pids+=("$!")
  vers+=("$v")
done
while [ "${#pids[@]}" -gt 0 ]; do wait_one; done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "compat.sh: FAILED on PostgreSQL ${failed[*]}" >&2
  exit 1
fi
echo "compat.sh: the compatibility set passed on PostgreSQL $*"
