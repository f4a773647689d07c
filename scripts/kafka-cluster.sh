#!/usr/bin/env bash
# Kafka as users run it, for the test rig (DESIGN.md section 8): a three-broker KRaft cluster with three
# separate controllers, from the same Maven Central jars as scripts/kafka.sh, on 127.0.0.1, with
# replication factor 3 and min.insync.replicas 2 (scripts/kafka/cluster-*.properties). The fault suite
# (scripts/faults.sh) runs it for the faults only a cluster has: a broker or a controller killed, a
# rolling restart, leaders moved.
#
#   scripts/kafka-cluster.sh start            fetch jars if missing, format storage if fresh, start every node
#                                             that is not running (all six at once), wait until the three
#                                             brokers answer
#   scripts/kafka-cluster.sh stop [--purge]   stop every node, brokers first (no-op for those not running);
#                                             --purge also removes data and logs (the jars stay)
#   scripts/kafka-cluster.sh status           exit 0 if all six nodes run and the three brokers answer, 3 if not
#   scripts/kafka-cluster.sh env              print the export lines: WALRELAY_TEST_KAFKA_CLUSTER_BROKERS (the
#                                             brokers' PLAINTEXT addresses), ..._PROXIED (their PROXIED
#                                             listeners) and ..._PROXY (the addresses those are advertised at),
#                                             each comma-separated in broker order
#   scripts/kafka-cluster.sh pid ROLE N       print the pid of broker or controller N
#   scripts/kafka-cluster.sh stop-node ROLE N [--kill]
#                                             SIGTERM (a broker's controlled shutdown) or, with --kill, SIGKILL
#                                             one node, and wait until it is gone
#   scripts/kafka-cluster.sh start-node ROLE N
#                                             start one node that is not running; wait until a broker answers
#                                             metadata requests (it is unfenced) or a controller listens
#   scripts/kafka-cluster.sh active-controller
#                                             print the node id of the active controller (the KRaft leader)
#
# ROLE is broker or controller; N is 1, 2 or 3. Controller N is node id N, broker N is node id N+3.
#
# Ports, from WALRELAY_KAFKA_CLUSTER_PORT (B, default 29180, below the ephemeral range: the fault suite
# restarts nodes mid-run, when a client socket could otherwise hold the port): controllers B..B+2,
# brokers B+3..B+5, their PROXIED listeners B+6..B+8 and the proxy addresses those are advertised at
# B+9..B+11. Nothing listens on the proxy addresses unless a test runs a proxy (test/faultproxy) there.
#
# 'start' on running nodes checks that they run this script's current configuration; if not, it stops
# with an error: run 'scripts/kafka-cluster.sh stop'.
#
# Environment:
#   KAFKA_VERSION                        org.apache.kafka:kafka_2.13 version (default 4.4.0)
#   WALRELAY_RIG_DIR                     state root (default <repo>/.rig); the cluster lives in
#                                        $WALRELAY_RIG_DIR/kafka-cluster, the jars in $WALRELAY_RIG_DIR/kafka/libs
#                                        (shared with scripts/kafka.sh)
#   WALRELAY_KAFKA_CLUSTER_PORT          B above (default 29180)
#   WALRELAY_KAFKA_CLUSTER_HEAP          a broker's max heap (default 384m)
#   WALRELAY_KAFKA_CLUSTER_CONTROLLER_HEAP
#                                        a controller's max heap (default 256m)
#   WALRELAY_KAFKA_CLUSTER_START_TIMEOUT seconds to wait for the nodes to answer (default 180)
#   JAVA_HOME                            Java to use (default: `java` on PATH); must be 17 or newer
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONF_SRC="$REPO/scripts/kafka"
RIG_DIR="${WALRELAY_RIG_DIR:-$REPO/.rig}"
STATE="$RIG_DIR/kafka-cluster"
KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
KAFKA_MAJOR="${KAFKA_VERSION%%.*}"
LIBS="" # scripts/kafka.sh's jars: ensure_runtime
BASE="${WALRELAY_KAFKA_CLUSTER_PORT:-29180}"
BROKER_HEAP="${WALRELAY_KAFKA_CLUSTER_HEAP:-384m}"
CONTROLLER_HEAP="${WALRELAY_KAFKA_CLUSTER_CONTROLLER_HEAP:-256m}"
TIMEOUT="${WALRELAY_KAFKA_CLUSTER_START_TIMEOUT:-180}"
CLUSTER_ID_FILE="$STATE/cluster.id"
DATAVER="$STATE/formatted.version" # the Kafka version that formatted every node's data
NODES=(controller-1 controller-2 controller-3 broker-1 broker-2 broker-3)

log() { echo "kafka-cluster.sh: $*" >&2; }
die() { echo "kafka-cluster.sh: ERROR: $*" >&2; exit 1; }

case "$KAFKA_MAJOR" in
  3 | 4) ;;
  *) die "KAFKA_VERSION=$KAFKA_VERSION: only 3.x (3.9+, for --initial-controllers) and 4.x are supported" ;;
esac
case "$BASE" in
  '' | *[!0-9]*) die "WALRELAY_KAFKA_CLUSTER_PORT=$BASE: want a port number" ;;
esac

# --- nodes -------------------------------------------------------------------------------------------

# A node is "controller-N" or "broker-N"; these give its id, ports and files.
node_id() {
  case "$1" in
    controller-*) echo "${1#controller-}" ;;
    broker-*) echo "$((${1#broker-} + 3))" ;;
  esac
}
node_port() { echo "$((BASE + $(node_id "$1") - 1))" ; }          # controllers B..B+2, brokers B+3..B+5
proxied_port() { echo "$((BASE + 5 + ${1#broker-}))" ; }          # B+6..B+8
proxy_port() { echo "$((BASE + 8 + ${1#broker-}))" ; }            # B+9..B+11
node_dir() { echo "$STATE/$1" ; }
node_conf() { echo "$STATE/$1/server.properties" ; }
node_data() { echo "$STATE/$1/data" ; }
node_logs() { echo "$STATE/$1/logs" ; }
node_pidfile() { echo "$STATE/$1/kafka.pid" ; }

# ROLE N from the command line, as a node name.
node_arg() {
  [ "$#" -eq 2 ] || die "want ROLE N (ROLE broker or controller, N 1, 2 or 3)"
  case "$1" in broker | controller) ;; *) die "role $1: want broker or controller" ;; esac
  case "$2" in 1 | 2 | 3) ;; *) die "$1 $2: want 1, 2 or 3" ;; esac
  echo "$1-$2"
}

addresses() { # addresses broker|proxied|proxy: the three brokers', comma-separated
  local out="" n p
  for n in 1 2 3; do
    case "$1" in
      broker) p="$(node_port "broker-$n")" ;;
      proxied) p="$(proxied_port "broker-$n")" ;;
      proxy) p="$(proxy_port "broker-$n")" ;;
    esac
    out="${out:+$out,}127.0.0.1:$p"
  done
  echo "$out"
}
BROKERS="$(addresses broker)"

bootstrap_controllers() {
  echo "127.0.0.1:$(node_port controller-1),127.0.0.1:$(node_port controller-2),127.0.0.1:$(node_port controller-3)"
}

# --- Java and jars (as scripts/kafka.sh) -----------------------------------------------------------

apt_install() {
  [ "$(id -u)" -eq 0 ] || die "$1 is missing and we are not root: apt-get install -y $*"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "$@" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "$@" >/dev/null; }
}

JAVA=""
# ensure_runtime sets JAVA and LIBS from scripts/kafka.sh, which installs Java 17 and fetches the
# jars when they are missing: one place does both, for the single node and the cluster alike.
ensure_runtime() {
  local out
  out="$(WALRELAY_RIG_DIR="$RIG_DIR" KAFKA_VERSION="$KAFKA_VERSION" "$REPO/scripts/kafka.sh" runtime)" ||
    die "scripts/kafka.sh could not provide Java and the Kafka $KAFKA_VERSION jars"
  JAVA="$(sed -n 1p <<<"$out")"
  LIBS="$(sed -n 2p <<<"$out")"
}

ensure_kcat() {
  command -v kcat >/dev/null 2>&1 || apt_install kcat
}

ensure_rig_dir() {
  if [ ! -d "$RIG_DIR" ]; then
    mkdir -p "$RIG_DIR"
    chmod 0755 "$RIG_DIR"
  fi
  [ -f "$RIG_DIR/.gitignore" ] || printf '*\n' >"$RIG_DIR/.gitignore"
  mkdir -p "$STATE" "$RIG_DIR/kafka/libs"
  local n
  for n in "${NODES[@]}"; do
    mkdir -p "$(node_logs "$n")"
  done
}

# Few threads and small heaps: six JVMs on two cores, beside everything else the tests run.
jvm_opts() { # jvm_opts NODE
  local heap="$BROKER_HEAP"
  case "$1" in controller-*) heap="$CONTROLLER_HEAP" ;; esac
  local -a o=(-Xms64m "-Xmx$heap" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:ParallelGCThreads=1 -XX:ConcGCThreads=1
    -XX:CICompilerCount=2 -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true -Dkafka.logs.dir="$(node_logs "$1")")
  if [ "$KAFKA_MAJOR" -ge 4 ]; then
    o+=(-Dlog4j2.configurationFile="$CONF_SRC/log4j2.xml")
  else
    o+=(-Dlog4j.configuration="file:$CONF_SRC/log4j.properties")
  fi
  printf '%s\n' "${o[@]}"
}

# --- configuration and storage ---------------------------------------------------------------------

render_conf() { # render_conf NODE
  local n="$1" role="${1%-*}" proxied="" proxy=""
  if [ "$role" = broker ]; then
    proxied="$(proxied_port "$n")" proxy="$(proxy_port "$n")"
  fi
  cat "$CONF_SRC/cluster-$role.properties" "$CONF_SRC/cluster-common.properties" | sed \
    -e "s|@NODE_ID@|$(node_id "$n")|g" -e "s|@PORT@|$(node_port "$n")|g" \
    -e "s|@PROXIED_PORT@|$proxied|g" -e "s|@PROXY_PORT@|$proxy|g" \
    -e "s|@BOOTSTRAP_CONTROLLERS@|$(bootstrap_controllers)|g" -e "s|@DATA_DIR@|$(node_data "$n")|g"
}

conf_current() { # conf_current NODE: the running node was started from what we would write now
  [ -f "$(node_conf "$1")" ] && render_conf "$1" | cmp -s - "$(node_conf "$1")"
}

# A UUID as Kafka's Uuid.randomUuid().toString() makes it (16 random bytes, URL-safe base64 without
# padding, not starting with '-'), without paying for a JVM start.
random_uuid() {
  local u=""
  while [ -z "$u" ] || [ "${u:0:1}" = "-" ]; do
    u="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
  done
  echo "$u"
}

formatted() {
  [ "$(cat "$DATAVER" 2>/dev/null)" = "$KAFKA_VERSION" ] || return 1
  local n
  for n in "${NODES[@]}"; do
    [ -f "$(node_data "$n")/meta.properties" ] || return 1
  done
}

# Format all six nodes together, or none: a dynamic quorum (KIP-853) bootstrapped with the three
# controllers as its initial voters (--initial-controllers, the same list on each, every controller
# with a directory id of its own); the brokers join as observers (--no-initial-controllers). A node
# formatted alone would get a new directory id that the quorum does not know, so a missing or stale
# node means a fresh cluster.
ensure_formatted() {
  formatted && return 0
  local n
  for n in "${NODES[@]}"; do
    ! live_pid "$n" >/dev/null || die "$n is running (pid $(live_pid "$n")) but the cluster's storage is incomplete or from another Kafka version; run 'scripts/kafka-cluster.sh stop --purge'"
  done
  [ ! -f "$DATAVER" ] || log "data in $STATE is from Kafka $(cat "$DATAVER") or incomplete; re-formatting every node"
  rm -f "$DATAVER"
  local cid initial="" c
  cid="$(random_uuid)"
  for c in 1 2 3; do
    initial="${initial:+$initial,}$c@127.0.0.1:$(node_port "controller-$c"):$(random_uuid)"
  done
  log "formatting storage of six nodes (KRaft, cluster id $cid, initial controllers $initial)"
  local -a pids=()
  for n in "${NODES[@]}"; do
    rm -rf "$(node_data "$n")"
    local -a opts quorum
    mapfile -t opts < <(jvm_opts "$n")
    case "$n" in
      controller-*) quorum=(--initial-controllers "$initial") ;;
      broker-*) quorum=(--no-initial-controllers) ;;
    esac
    "$JAVA" "${opts[@]}" -cp "$LIBS/*" kafka.tools.StorageTool format -t "$cid" -c "$(node_conf "$n")" "${quorum[@]}" \
      >"$(node_logs "$n")/format.log" 2>&1 &
    pids+=($!)
  done
  local i failed=0
  for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
      failed=1
      echo "----- ${NODES[$i]}: $(node_logs "${NODES[$i]}")/format.log -----" >&2
      cat "$(node_logs "${NODES[$i]}")/format.log" >&2
    fi
  done
  [ "$failed" -eq 0 ] || die "StorageTool format failed"
  echo "$cid" >"$CLUSTER_ID_FILE"
  echo "$KAFKA_VERSION" >"$DATAVER"
}

# --- processes -------------------------------------------------------------------------------------

# A node's pid, if it is alive (and really is that node's kafka.Kafka, not a recycled pid).
live_pid() {
  local pid
  pid="$(cat "$(node_pidfile "$1")" 2>/dev/null || true)"
  [ -n "$pid" ] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "kafka.Kafka $(node_conf "$1")" || return 1
  echo "$pid"
}

port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# A broker answers when it lists itself in a metadata response: its listeners open only once it is
# caught up with the metadata log and unfenced. A controller answers when it listens.
answers() {
  local n="$1" port
  port="$(node_port "$n")"
  port_open "$port" || return 1
  case "$n" in
    controller-*) return 0 ;;
  esac
  kcat -b "127.0.0.1:$port" -L -m 3 2>/dev/null | grep -q "broker $(node_id "$n") at 127.0.0.1:$port"
}

# All three brokers are in the cluster's metadata.
cluster_answers() {
  local n
  n="$(kcat -b "$BROKERS" -L -m 3 2>/dev/null | grep -c '^  broker [0-9]* at ' || true)"
  [ "$n" -eq 3 ]
}

print_logs() { # print_logs NODE...
  local n f
  for n in "$@"; do
    for f in "$(node_logs "$n")/kafka.out" "$(node_logs "$n")/server.log"; do
      if [ -s "$f" ]; then
        echo "----- $n: last 30 lines of $f -----" >&2
        tail -n 30 "$f" >&2 || true
      fi
    done
  done
  echo "-----" >&2
}

fail_with_logs() { # fail_with_logs MESSAGE NODE...
  local msg="$1"
  shift
  echo "kafka-cluster.sh: ERROR: $msg" >&2
  print_logs "$@"
  exit 1
}

spawn() { # spawn NODE: start the node's JVM in the background, detached
  local n="$1" pid
  local -a opts
  mapfile -t opts < <(jvm_opts "$n")
  : >"$(node_logs "$n")/kafka.out"
  # setsid + nohup: the node gets its own session and outlives the calling shell.
  setsid nohup "$JAVA" "${opts[@]}" -cp "$LIBS/*" kafka.Kafka "$(node_conf "$n")" \
    >"$(node_logs "$n")/kafka.out" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$(node_pidfile "$n")"
  # Until it has exec'd setsid, nohup and then java, the job is a fork of this shell, and live_pid
  # (which checks the command line) would not know it: wait for the last exec, a moment.
  local deadline=$((SECONDS + 10))
  until live_pid "$n" >/dev/null || ! kill -0 "$pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; do
    sleep 0.05
  done
}

# wait_nodes NODE...: wait until each answers, failing when one exits or the time is up.
wait_nodes() {
  local deadline=$((SECONDS + TIMEOUT)) n pending
  while :; do
    pending=()
    for n in "$@"; do
      kill -0 "$(cat "$(node_pidfile "$n")" 2>/dev/null || echo none)" 2>/dev/null ||
        { rm -f "$(node_pidfile "$n")"; fail_with_logs "$n exited during startup" "$n"; }
      answers "$n" || pending+=("$n")
    done
    [ "${#pending[@]}" -gt 0 ] || return 0
    [ "$SECONDS" -lt "$deadline" ] ||
      fail_with_logs "${pending[*]} did not answer within ${TIMEOUT}s (still running; 'scripts/kafka-cluster.sh stop' ends them)" "${pending[@]}"
    sleep 0.5
  done
}

wait_gone() { # wait_gone PID SECONDS: 0 once the process is gone, 1 at the deadline
  local pid="$1" deadline=$((SECONDS + $2))
  while kill -0 "$pid" 2>/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

# --- verbs -----------------------------------------------------------------------------------------

cmd_start() {
  ensure_rig_dir
  local n pid
  local -a down=()
  for n in "${NODES[@]}"; do
    if pid="$(live_pid "$n")"; then
      conf_current "$n" ||
        die "$n is running (pid $pid) from $(node_conf "$n"), which differs from what $CONF_SRC/cluster-*.properties and the port settings give now; run 'scripts/kafka-cluster.sh stop' first"
    else
      down+=("$n")
    fi
  done
  if [ "${#down[@]}" -eq 0 ]; then
    [ "$(cat "$DATAVER" 2>/dev/null)" = "$KAFKA_VERSION" ] ||
      die "the cluster runs Kafka $(cat "$DATAVER" 2>/dev/null || echo '?'), but KAFKA_VERSION=$KAFKA_VERSION was asked for; run 'scripts/kafka-cluster.sh stop --purge' first"
    wait_nodes "${NODES[@]}"
    log "already running (Kafka $(cat "$DATAVER" 2>/dev/null || echo '?')) on $BROKERS"
    return 0
  fi
  for n in "${down[@]}"; do
    rm -f "$(node_pidfile "$n")"
    ! port_open "$(node_port "$n")" || die "port 127.0.0.1:$(node_port "$n") ($n) is already in use by another process"
    if [ "${n%-*}" = broker ]; then
      ! port_open "$(proxied_port "$n")" || die "port 127.0.0.1:$(proxied_port "$n") ($n PROXIED) is already in use by another process"
    fi
  done
  ensure_runtime
  ensure_kcat
  for n in "${NODES[@]}"; do
    live_pid "$n" >/dev/null || render_conf "$n" >"$(node_conf "$n")"
  done
  ensure_formatted
  log "starting ${down[*]} (Kafka $KAFKA_VERSION; brokers $BROKERS, controllers $(bootstrap_controllers); state in $STATE)"
  for n in "${down[@]}"; do
    spawn "$n"
  done
  wait_nodes "${NODES[@]}"
  local deadline=$((SECONDS + TIMEOUT))
  until cluster_answers; do
    [ "$SECONDS" -lt "$deadline" ] || fail_with_logs "the brokers do not list all three brokers within ${TIMEOUT}s" "${NODES[@]}"
    sleep 0.5
  done
  log "ready: Kafka $KAFKA_VERSION, brokers $BROKERS, controllers $(bootstrap_controllers)"
}

# stop_nodes SECONDS NODE...: SIGTERM to each, SIGKILL to those still running after SECONDS.
stop_nodes() {
  local grace="$1" n pid
  shift
  local -A pids=()
  for n in "$@"; do
    if pid="$(live_pid "$n")"; then
      pids[$n]="$pid"
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done
  for n in "${!pids[@]}"; do
    if ! wait_gone "${pids[$n]}" "$grace"; then
      log "$n still running ${grace}s after SIGTERM; sending SIGKILL"
      kill -KILL "${pids[$n]}" 2>/dev/null || true
      wait_gone "${pids[$n]}" 10 || true
    fi
    rm -f "$(node_pidfile "$n")"
  done
}

cmd_stop() {
  local purge=0 a
  for a in "$@"; do
    case "$a" in
      --purge) purge=1 ;;
      *) die "stop: unknown argument $a" ;;
    esac
  done
  log "stopping the cluster (brokers, then controllers)"
  # The brokers first: a broker's controlled shutdown needs the controllers.
  stop_nodes 30 broker-1 broker-2 broker-3
  stop_nodes 30 controller-1 controller-2 controller-3
  if [ "$purge" -eq 1 ]; then
    log "removing data and logs in $STATE"
    rm -rf "$STATE"
  fi
}

cmd_status() {
  local n pid rc=0
  for n in "${NODES[@]}"; do
    if pid="$(live_pid "$n")" && answers "$n"; then
      echo "kafka-cluster: $n (node $(node_id "$n")) running (pid $pid) on 127.0.0.1:$(node_port "$n")"
    else
      echo "kafka-cluster: $n (node $(node_id "$n")) not running"
      rc=3
    fi
  done
  return "$rc"
}

cmd_env() {
  echo "export WALRELAY_TEST_KAFKA_CLUSTER_BROKERS=$BROKERS"
  echo "export WALRELAY_TEST_KAFKA_CLUSTER_PROXIED=$(addresses proxied)"
  echo "export WALRELAY_TEST_KAFKA_CLUSTER_PROXY=$(addresses proxy)"
}

cmd_pid() {
  local n
  n="$(node_arg "$@")"
  live_pid "$n" || { echo "kafka-cluster.sh: $n is not running" >&2; exit 3; }
}

cmd_stop_node() {
  local sig=TERM
  if [ "${3:-}" = --kill ]; then
    sig=KILL
  elif [ -n "${3:-}" ]; then
    die "stop-node: unknown argument $3"
  fi
  local n pid
  n="$(node_arg "${1:-}" "${2:-}")"
  pid="$(live_pid "$n")" || { log "$n is not running"; return 0; }
  kill -"$sig" "$pid"
  # A broker's controlled shutdown moves its leaders away first: seconds, not more.
  wait_gone "$pid" 60 || die "$n (pid $pid) still running 60s after SIG$sig"
  rm -f "$(node_pidfile "$n")"
  log "$n (pid $pid) stopped by SIG$sig"
}

cmd_start_node() {
  local n
  n="$(node_arg "$@")"
  formatted || die "the cluster's storage is not formatted: run 'scripts/kafka-cluster.sh start'"
  if live_pid "$n" >/dev/null; then
    wait_nodes "$n"
    log "$n already running"
    return 0
  fi
  conf_current "$n" || die "$(node_conf "$n") differs from what $CONF_SRC/cluster-*.properties give now; run 'scripts/kafka-cluster.sh stop' and start"
  ! port_open "$(node_port "$n")" || die "port 127.0.0.1:$(node_port "$n") ($n) is already in use by another process"
  ensure_runtime
  spawn "$n"
  wait_nodes "$n"
  log "$n running (pid $(live_pid "$n"))"
}

# The active controller is the KRaft leader. Each controller keeps the leader it knows of, with its
# epoch, in the quorum-state file of the metadata log; the live controller's file with the highest
# epoch names it. The file is written at every election, so no JVM needs to start to ask.
cmd_active_controller() {
  local n f line epoch leader best=-1 id=""
  for n in controller-1 controller-2 controller-3; do
    live_pid "$n" >/dev/null || continue
    f="$(node_data "$n")/__cluster_metadata-0/quorum-state"
    [ -f "$f" ] || continue
    line="$(cat "$f")"
    epoch="$(sed -n 's/.*"leaderEpoch":\([0-9-]*\).*/\1/p' <<<"$line")"
    leader="$(sed -n 's/.*"leaderId":\([0-9-]*\).*/\1/p' <<<"$line")"
    [ -n "$epoch" ] && [ -n "$leader" ] || continue
    if [ "$epoch" -gt "$best" ] && [ "$leader" -ge 1 ]; then
      best="$epoch" id="$leader"
    fi
  done
  [ -n "$id" ] && live_pid "controller-$id" >/dev/null ||
    { echo "kafka-cluster.sh: no live controller knows a live leader (an election may be under way)" >&2; exit 3; }
  echo "$id"
}

case "${1:-}" in
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  status) shift; cmd_status "$@" ;;
  env) shift; cmd_env "$@" ;;
  pid) shift; cmd_pid "$@" ;;
  stop-node) shift; cmd_stop_node "$@" ;;
  start-node) shift; cmd_start_node "$@" ;;
  active-controller) shift; cmd_active_controller "$@" ;;
  *)
    echo "usage: $0 {start|stop [--purge]|status|env|pid ROLE N|stop-node ROLE N [--kill]|start-node ROLE N|active-controller}" >&2
    echo "       ROLE is broker or controller, N is 1, 2 or 3" >&2
    exit 2
    ;;
esac
