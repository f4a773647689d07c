#!/usr/bin/env bash
# The Kafka compatibility set (the end-to-end tests that exercise what differs
# between Kafka versions: the protocol versions a broker accepts, KIP-896; the
# admin calls check makes; TLS and SASL) on an older supported Kafka, on a
# single-node broker of its own beside the rig's, with the rig's PostgreSQL.
# Every other test runs against the rig's Kafka (scripts/kafka.sh).
#
#   scripts/compat-kafka.sh 'TEST_REGEX' 3.9.2 [VERSION...]
#
# Each version in turn: scripts/kafka.sh starts a fresh broker of that version
# (org.apache.kafka:kafka_2.13 from Maven Central, fetched once into
# $WALRELAY_RIG_DIR/kafka-<major.minor>/kafka/libs/<version> and kept there),
# the tests run against it (WALRELAY_TEST_KAFKA_BROKERS, and
# WALRELAY_TEST_KAFKA_LIBS for the tests that start a secured broker of their
# own from the same jars), and the broker is stopped and its data and logs
# removed, also when the set fails, and when the script is interrupted (INT,
# TERM) once the command it was running has ended.
#
# Environment:
#   WALRELAY_KAFKA_COMPAT_PORT  B, the broker's port on 127.0.0.1 (default
#                               29200): its controller is B+1, its PROXIED
#                               listener B+2, advertised at B+3 (see
#                               scripts/kafka.sh). Below Linux's ephemeral
#                               port range (32768-60999), like compat.sh's
#                               clusters: it starts while other suites run,
#                               whose client sockets could hold any port there.
#                               The fault suite's broker is on 29170-29173, its
#                               three-broker cluster on 29180-29191.
#   GO                          the go command (default go)
#
# Exit status 1 if the set failed, or a broker did not start, on any version.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RIG_DIR="${WALRELAY_RIG_DIR:-$REPO/.rig}"
PORT="${WALRELAY_KAFKA_COMPAT_PORT:-29200}"
[ "$#" -ge 2 ] || { echo "usage: $0 TEST_REGEX VERSION..." >&2; exit 2; }
TESTS="$1"
shift
cd "$REPO"

# The rig's PostgreSQL (and PgBouncer) for the tests; the Kafka variables are
# replaced by each version's.
eval "$(scripts/rig.sh env)"

# kafka runs scripts/kafka.sh for version $VERSION's broker.
VERSION=""
kafka() {
  WALRELAY_RIG_DIR="$RIG_DIR/kafka-$(echo "$VERSION" | cut -d. -f1,2)" KAFKA_VERSION="$VERSION" \
    WALRELAY_KAFKA_PORT="$PORT" WALRELAY_KAFKA_CONTROLLER_PORT="$((PORT + 1))" \
    WALRELAY_KAFKA_PROXIED_PORT="$((PORT + 2))" WALRELAY_KAFKA_PROXY_PORT="$((PORT + 3))" \
    "$REPO/scripts/kafka.sh" "$@"
}
# The broker of the version running when the script ends is stopped and
# purged whatever ends it.
cleanup() {
  [ -z "$VERSION" ] || kafka stop --purge || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# one runs the set on version $VERSION.
one() {
  local rc=0 start=$SECONDS
  echo "=== Kafka $VERSION: compatibility set (127.0.0.1:$PORT)"
  # Fresh: a broker left by an interrupted run is stopped and its data removed.
  kafka stop --purge || true
  if kafka start; then
    eval "$(kafka env)"
    (cd test && "$REPO/scripts/gotest.sh" "compat-kafka-$VERSION" -race -count=1 -timeout 15m -run "$TESTS" ./e2e) || rc=$?
  else
    rc=1
  fi
  kafka stop --purge || true
  echo "=== Kafka $VERSION: exit $rc after $((SECONDS - start)) s"
  return "$rc"
}

failed=()
for VERSION in "$@"; do
  one || failed+=("$VERSION")
done
VERSION=""

if [ "${#failed[@]}" -gt 0 ]; then
  echo "compat-kafka.sh: FAILED on Kafka ${failed[*]}" >&2
  exit 1
fi
echo "compat-kafka.sh: the Kafka compatibility set passed on Kafka $*"
