#!/usr/bin/env bash
# The fault-injection suite (test/faults) on a rig of its own: a private
# PostgreSQL, PgBouncer and Kafka, and a three-broker Kafka cluster
# (scripts/kafka-cluster.sh), that the suite may kill, pause and restart
# without touching the rig the other suites share, so that make test can run
# it beside them (scripts/test.sh, WALRELAY_FAULTS_ALONGSIDE).
#
#   scripts/faults.sh [GO_TEST_ARGS...]
#
# starts the private rig, runs
#   cd test; scripts/gotest.sh faults -v -tags faults -race -count=1 -p 1 -parallel N -timeout 40m [GO_TEST_ARGS...] ./faults
# against it, stops it (and removes its data) however the run ends, and exits
# as the test run did (1 if the rig did not start).
#
# Environment:
#   WALRELAY_RIG_DIR          the shared rig's state root (default <repo>/.rig): the PostgreSQL
#                             binaries and Kafka jars it fetched are reused from there, never
#                             fetched again, and nothing else of it is touched
#   WALRELAY_FAULTS_RIG_DIR   the private rig's state root (default $WALRELAY_RIG_DIR/faults)
#   WALRELAY_FAULTS_PG_PORT   its PostgreSQL port (default 25470)
#   WALRELAY_FAULTS_KAFKA_PORT
#                             its Kafka ports: broker, then the next three for the controller,
#                             the PROXIED listener and the port it is advertised at (default 29170).
#                             Both below the ephemeral port range (32768-60999): the suite
#                             restarts these services mid-run, when a client socket of any
#                             test could otherwise hold the port
#   WALRELAY_FAULTS_KAFKA_CLUSTER_PORT
#                             its cluster's first port: twelve from there, for its three
#                             controllers, three brokers, their PROXIED listeners and the
#                             ports those are advertised at (default 29180; see
#                             scripts/kafka-cluster.sh)
#   WALRELAY_FAULTS_PGBOUNCER_PORT
#                             its PgBouncer's port (default 26433; the shared rig's is 26432)
#   WALRELAY_FAULTS_PARALLEL  N above: the suite's parallel tests (those whose faults hit only
#                             their own relays, proxies or servers) run N at a time, after the
#                             ones that stop or restart the rig's services (default 2)
#   WALRELAY_FAULTS_KEEP=1    leave the private rig running afterwards (to look at it; stop it
#                             with the same environment and scripts/kafka-cluster.sh stop --purge,
#                             then scripts/rig.sh stop --purge)
# Every other knob of the rig's (WALRELAY_PG_*, WALRELAY_PGBOUNCER_*, WALRELAY_KAFKA_*,
# WALRELAY_TEST_*) is replaced:
# the suite must see the private rig only.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
SHARED="${WALRELAY_RIG_DIR:-$REPO/.rig}"
PRIV="${WALRELAY_FAULTS_RIG_DIR:-$SHARED/faults}"
PG_PORT="${WALRELAY_FAULTS_PG_PORT:-25470}"
KPORT="${WALRELAY_FAULTS_KAFKA_PORT:-29170}"
CPORT="${WALRELAY_FAULTS_KAFKA_CLUSTER_PORT:-29180}"
BPORT="${WALRELAY_FAULTS_PGBOUNCER_PORT:-26433}"
KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
PARALLEL="${WALRELAY_FAULTS_PARALLEL:-2}"

log() { echo "faults.sh: $*" >&2; }
die() { echo "faults.sh: ERROR: $*" >&2; exit 1; }

mkdir -p "$SHARED"
SHARED="$(cd "$SHARED" && pwd)"
mkdir -p "$PRIV"
PRIV="$(cd "$PRIV" && pwd)"
[ "$PRIV" != "$SHARED" ] || die "WALRELAY_FAULTS_RIG_DIR is the shared rig's folder ($SHARED)"
case "$PG_PORT" in 55432) die "WALRELAY_FAULTS_PG_PORT is the shared rig's port" ;; esac
case "$KPORT" in 5909[0-5] | 5908[9]) die "WALRELAY_FAULTS_KAFKA_PORT overlaps the shared rig's ports" ;; esac
case "$BPORT" in 26432) die "WALRELAY_FAULTS_PGBOUNCER_PORT is the shared rig's port" ;; esac
case "$CPORT" in '' | *[!0-9]*) die "WALRELAY_FAULTS_KAFKA_CLUSTER_PORT=$CPORT: want a port number" ;; esac
# The cluster's twelve ports hold neither the private broker's four nor the shared rig's Kafka ports.
[ "$CPORT" -gt $((KPORT + 3)) ] || [ $((CPORT + 11)) -lt "$KPORT" ] ||
  die "WALRELAY_FAULTS_KAFKA_CLUSTER_PORT ($CPORT-$((CPORT + 11))) overlaps WALRELAY_FAULTS_KAFKA_PORT ($KPORT-$((KPORT + 3)))"
[ "$CPORT" -gt 59095 ] || [ $((CPORT + 11)) -lt 59092 ] ||
  die "WALRELAY_FAULTS_KAFKA_CLUSTER_PORT ($CPORT-$((CPORT + 11))) overlaps the shared rig's Kafka ports"

# Nothing of the caller's rig environment leaks into the private rig's (but
# the report folder of scripts/test.sh's run, which gotest.sh writes to).
report="${WALRELAY_TEST_REPORT_DIR:-}"
while IFS= read -r v; do
  unset "$v"
done < <(compgen -e | grep -E '^(WALRELAY_TEST_|WALRELAY_PG_|WALRELAY_PGBOUNCER_|WALRELAY_KAFKA_)' || true)
unset PG_MAJOR PG_VERSION
[ -z "$report" ] || export WALRELAY_TEST_REPORT_DIR="$report"
export KAFKA_VERSION
export WALRELAY_RIG_DIR="$PRIV"
export WALRELAY_PG_PORT="$PG_PORT"
export WALRELAY_PGBOUNCER_PORT="$BPORT"
export WALRELAY_KAFKA_PORT="$KPORT"
export WALRELAY_KAFKA_CONTROLLER_PORT="$((KPORT + 1))"
export WALRELAY_KAFKA_PROXIED_PORT="$((KPORT + 2))"
export WALRELAY_KAFKA_PROXY_PORT="$((KPORT + 3))"
export WALRELAY_KAFKA_CLUSTER_PORT="$CPORT"

# The downloads, shared: pg.sh looks for server binaries in $RIG_DIR/pgbin,
# kafka.sh for jars in $RIG_DIR/kafka/libs/<version>. Links to the shared
# rig's, created where missing (a fetch, if one is still needed, then lands
# in the shared folder for everyone).
mkdir -p "$SHARED/pgbin" "$SHARED/kafka/libs" "$PRIV/kafka/libs"
[ -e "$PRIV/pgbin" ] || ln -s "$SHARED/pgbin" "$PRIV/pgbin"
if [ ! -e "$PRIV/kafka/libs/$KAFKA_VERSION" ]; then
  [ -f "$SHARED/kafka/libs/$KAFKA_VERSION/.complete" ] || log "no Kafka $KAFKA_VERSION jars in $SHARED yet: kafka.sh fetches them"
  ln -s "$SHARED/kafka/libs/$KAFKA_VERSION" "$PRIV/kafka/libs/$KAFKA_VERSION"
fi
[ -f "$PRIV/.gitignore" ] || printf '*\n' >"$PRIV/.gitignore"

stop_rig() {
  if [ "${WALRELAY_FAULTS_KEEP:-0}" = 1 ]; then
    log "private rig left running (WALRELAY_RIG_DIR=$PRIV)"
    return 0
  fi
  # --purge removes the private data; never --purge-all (the jars are the shared rig's).
  "$REPO/scripts/kafka-cluster.sh" stop --purge >&2 || true
  "$REPO/scripts/kafka.sh" stop --purge >&2 || true
  "$REPO/scripts/pgbouncer.sh" stop --purge >&2 || true
  "$REPO/scripts/pg.sh" stop --purge >&2 || true
}
trap stop_rig EXIT

log "private rig in $PRIV: PostgreSQL 127.0.0.1:$PG_PORT, PgBouncer 127.0.0.1:$BPORT, Kafka 127.0.0.1:$KPORT-$((KPORT + 3)), Kafka cluster 127.0.0.1:$CPORT-$((CPORT + 11))"
"$REPO/scripts/rig.sh" start >&2 || die "the private rig did not start"
# After the rig: its kafka.sh fetches the jars the cluster shares, if they are missing.
"$REPO/scripts/kafka-cluster.sh" start >&2 || die "the private Kafka cluster did not start"
eval "$("$REPO/scripts/rig.sh" env)"
eval "$("$REPO/scripts/kafka-cluster.sh" env)"

# What the suite reaches, checked: the private rig's addresses and the
# scripts' state (the tests restart services with scripts/pg.sh and
# scripts/kafka.sh in this environment).
case "$WALRELAY_TEST_PG_URL" in
  *"@127.0.0.1:$PG_PORT/"*) ;;
  *) die "WALRELAY_TEST_PG_URL=$WALRELAY_TEST_PG_URL is not the private rig's" ;;
esac
case "$WALRELAY_TEST_PGBOUNCER_TX_URL" in
  *"@127.0.0.1:$BPORT/"*) ;;
  *) die "WALRELAY_TEST_PGBOUNCER_TX_URL=$WALRELAY_TEST_PGBOUNCER_TX_URL is not the private rig's" ;;
esac
[ "$WALRELAY_TEST_KAFKA_BROKERS" = "127.0.0.1:$KPORT" ] ||
  die "WALRELAY_TEST_KAFKA_BROKERS=$WALRELAY_TEST_KAFKA_BROKERS is not the private rig's"
case "$WALRELAY_TEST_PG_LOG" in
  "$PRIV"/*) ;;
  *) die "WALRELAY_TEST_PG_LOG=$WALRELAY_TEST_PG_LOG is not in $PRIV" ;;
esac
[ "$(cat "$PRIV/kafka/kafka.pid" 2>/dev/null)" = "$("$REPO/scripts/kafka.sh" pid)" ] ||
  die "kafka.sh pid does not name the private broker"
[ "$WALRELAY_TEST_KAFKA_CLUSTER_BROKERS" = "127.0.0.1:$((CPORT + 3)),127.0.0.1:$((CPORT + 4)),127.0.0.1:$((CPORT + 5))" ] ||
  die "WALRELAY_TEST_KAFKA_CLUSTER_BROKERS=$WALRELAY_TEST_KAFKA_CLUSTER_BROKERS is not the private cluster's"
[ "$(cat "$PRIV/kafka-cluster/broker-1/kafka.pid" 2>/dev/null)" = "$("$REPO/scripts/kafka-cluster.sh" pid broker 1)" ] ||
  die "kafka-cluster.sh pid does not name the private cluster's brokers"

rc=0
(cd test && "$REPO/scripts/gotest.sh" faults -v -tags faults -race -count=1 -p 1 -parallel "$PARALLEL" -timeout 40m "$@" ./faults) || rc=$?
log "fault suite: exit $rc"
exit "$rc"
