#!/usr/bin/env bash
# Test-rig Apache Kafka for walrelay (DESIGN.md section 8): the real broker from Maven Central,
# single node, KRaft combined mode (broker+controller), on 127.0.0.1, run with the machine's Java 17.
#
#   scripts/kafka.sh start          fetch jars if missing, format storage if fresh, start, wait until it answers
#   scripts/kafka.sh stop [--purge] stop (no-op if not running); --purge also removes data and logs
#                                   (the fetched jars stay as a cache; --purge-all removes them too)
#   scripts/kafka.sh status         exit 0 if running and answering, 3 if not
#   scripts/kafka.sh env            print: export WALRELAY_TEST_KAFKA_BROKERS=... (and the PROXIED/PROXY pair, and
#                                   WALRELAY_TEST_KAFKA_LIBS, the broker's jars, for tests that run a broker of their own)
#   scripts/kafka.sh pid            print the broker's pid (the fault suite pauses and kills it)
#   scripts/kafka.sh runtime        install Java and fetch the jars if missing; print the java binary and the
#                                   jars' folder, a line each (scripts/kafka-cluster.sh runs its nodes with them)
#
# Besides the ordinary listener, the broker has a second plain listener, PROXIED, for the fault-injection
# tests (test/faultproxy): bound on 127.0.0.1:$WALRELAY_KAFKA_PROXIED_PORT but advertised as
# 127.0.0.1:$WALRELAY_KAFKA_PROXY_PORT, where a test runs a proxy to the PROXIED port. Nothing listens on
# the proxy port unless a test does.
#
# 'start' on a running broker checks that it runs this script's current configuration; if not (say, it
# was started before the PROXIED listener existed), it stops with an error: run 'scripts/kafka.sh stop'.
#
# Environment:
#   KAFKA_VERSION                     org.apache.kafka:kafka_2.13 version (default 4.4.0; 3.9.x works too)
#   WALRELAY_RIG_DIR                  state root (default <repo>/.rig); this broker lives in $WALRELAY_RIG_DIR/kafka
#   WALRELAY_KAFKA_PORT               broker port on 127.0.0.1 (default 59092)
#   WALRELAY_KAFKA_CONTROLLER_PORT    KRaft controller port on 127.0.0.1 (default 59093)
#   WALRELAY_KAFKA_PROXIED_PORT       PROXIED listener port on 127.0.0.1 (default 59094)
#   WALRELAY_KAFKA_PROXY_PORT         port the PROXIED listener is advertised at (default 59095)
#   WALRELAY_KAFKA_HEAP               max heap (default 512m)
#   WALRELAY_KAFKA_START_TIMEOUT      seconds to wait for the broker to answer (default 120)
#   JAVA_HOME                         Java to use (default: `java` on PATH); must be 17 or newer
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONF_SRC="$REPO/scripts/kafka"
RIG_DIR="${WALRELAY_RIG_DIR:-$REPO/.rig}"
STATE="$RIG_DIR/kafka"
KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
KAFKA_MAJOR="${KAFKA_VERSION%%.*}"
LIBS="$STATE/libs/$KAFKA_VERSION"
DATA="$STATE/data"
LOGDIR="$STATE/logs"
CONF="$STATE/server.properties"
PIDFILE="$STATE/kafka.pid"
VERFILE="$STATE/kafka.version"     # version of the running broker
DATAVER="$DATA/.walrelay-rig-version" # version that formatted $DATA
PORT="${WALRELAY_KAFKA_PORT:-59092}"
CPORT="${WALRELAY_KAFKA_CONTROLLER_PORT:-59093}"
PROXIED_PORT="${WALRELAY_KAFKA_PROXIED_PORT:-59094}"
PROXY_PORT="${WALRELAY_KAFKA_PROXY_PORT:-59095}"
HEAP="${WALRELAY_KAFKA_HEAP:-512m}"
TIMEOUT="${WALRELAY_KAFKA_START_TIMEOUT:-120}"
BROKERS="127.0.0.1:$PORT"

log() { echo "kafka.sh: $*" >&2; }
die() { echo "kafka.sh: ERROR: $*" >&2; exit 1; }

fail_with_log() {
  echo "kafka.sh: ERROR: $*" >&2
  local f
  for f in "$LOGDIR/kafka.out" "$LOGDIR/server.log"; do
    if [ -s "$f" ]; then
      echo "----- last 40 lines of $f -----" >&2
      tail -n 40 "$f" >&2 || true
    fi
  done
  echo "-----" >&2
  exit 1
}

case "$KAFKA_MAJOR" in
  3 | 4) ;;
  *) die "KAFKA_VERSION=$KAFKA_VERSION: only 3.x (3.9+) and 4.x are supported" ;;
esac

apt_install() {
  [ "$(id -u)" -eq 0 ] || die "$1 is missing and we are not root: apt-get install -y $*"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "$@" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "$@" >/dev/null; }
}

java_bin() {
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
    echo "$JAVA_HOME/bin/java"
  elif command -v java >/dev/null 2>&1; then
    command -v java
  else
    apt_install openjdk-17-jre-headless
    command -v java
  fi
}

JAVA=""
ensure_java() {
  JAVA="$(java_bin)"
  local v
  v="$("$JAVA" -XshowSettings:properties -version 2>&1 | awk -F'= ' '/java.specification.version/ {print $2; exit}')"
  [ -n "$v" ] || die "cannot tell the version of $JAVA"
  [ "${v%%.*}" -ge 17 ] 2>/dev/null || die "$JAVA is Java $v; Kafka $KAFKA_VERSION here needs Java 17+ (set JAVA_HOME)"
}

ensure_rig_dir() {
  if [ ! -d "$RIG_DIR" ]; then
    mkdir -p "$RIG_DIR"
    chmod 0755 "$RIG_DIR"
  fi
  # Keep the state folder out of git without touching the repo's .gitignore.
  [ -f "$RIG_DIR/.gitignore" ] || printf '*\n' >"$RIG_DIR/.gitignore"
  mkdir -p "$STATE" "$LOGDIR"
}

# Jars: fetched once per version into $LIBS (with Maven's ~/.m2 as a second cache).
ensure_libs() {
  if [ -f "$LIBS/.complete" ]; then
    return 0
  fi
  command -v mvn >/dev/null 2>&1 || apt_install maven
  log "fetching org.apache.kafka:kafka_2.13:$KAFKA_VERSION and dependencies (Maven) into $LIBS"
  local tmp="$LIBS.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  if ! mvn -q -B -f "$CONF_SRC/pom.xml" \
      -Dkafka.version="$KAFKA_VERSION" -Dkafka.major="$KAFKA_MAJOR" -Dlibs.dir="$tmp" \
      dependency:copy-dependencies >"$STATE/mvn.log" 2>&1; then
    tail -n 30 "$STATE/mvn.log" >&2
    rm -rf "$tmp"
    die "Maven could not fetch kafka_2.13:$KAFKA_VERSION (see $STATE/mvn.log); try another KAFKA_VERSION"
  fi
  ls "$tmp"/kafka_2.13-"$KAFKA_VERSION".jar >/dev/null 2>&1 || { rm -rf "$tmp"; die "kafka_2.13-$KAFKA_VERSION.jar missing after fetch"; }
  touch "$tmp/.complete"
  if [ -f "$LIBS/.complete" ]; then
    rm -rf "$tmp" # another fetch (scripts/kafka-cluster.sh's, say) got there first
  else
    rm -rf "$LIBS"
    mv "$tmp" "$LIBS"
  fi
}

jvm_opts() {
  local -a o=(-Xms128m "-Xmx$HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError
    -Djava.awt.headless=true -Dkafka.logs.dir="$LOGDIR")
  if [ "$KAFKA_MAJOR" -ge 4 ]; then
    o+=(-Dlog4j2.configurationFile="$CONF_SRC/log4j2.xml")
  else
    o+=(-Dlog4j.configuration="file:$CONF_SRC/log4j.properties")
  fi
  printf '%s\n' "${o[@]}"
}

render_conf() {
  sed -e "s|@PORT@|$PORT|g" -e "s|@CONTROLLER_PORT@|$CPORT|g" -e "s|@DATA_DIR@|$DATA|g" \
    -e "s|@PROXIED_PORT@|$PROXIED_PORT|g" -e "s|@PROXY_PORT@|$PROXY_PORT|g" \
    "$CONF_SRC/server.properties"
}

write_conf() {
  render_conf >"$CONF"
}

# The running broker was started from $CONF; it is current if $CONF is what we would write now.
conf_current() {
  [ -f "$CONF" ] && render_conf | cmp -s - "$CONF"
}

# Format storage when the data folder is fresh, or was formatted by another Kafka version.
ensure_formatted() {
  if [ -f "$DATA/meta.properties" ] && [ "$(cat "$DATAVER" 2>/dev/null)" = "$KAFKA_VERSION" ]; then
    return 0
  fi
  [ ! -d "$DATA" ] || log "data in $DATA is from Kafka $(cat "$DATAVER" 2>/dev/null || echo '?'); re-formatting"
  rm -rf "$DATA"
  local -a opts
  mapfile -t opts < <(jvm_opts)
  # A fresh cluster id, made like Kafka's Uuid.randomUuid().toString() (16 random bytes, URL-safe
  # base64 without padding, not starting with '-'), without paying for another JVM start.
  local cid=""
  while [ -z "$cid" ] || [ "${cid:0:1}" = "-" ]; do
    cid="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
  done
  log "formatting storage (KRaft, standalone controller, cluster id $cid)"
  if ! "$JAVA" "${opts[@]}" -cp "$LIBS/*" kafka.tools.StorageTool format \
      -t "$cid" -c "$CONF" --standalone >>"$LOGDIR/format.log" 2>&1; then
    cat "$LOGDIR/format.log" >&2
    die "StorageTool format failed"
  fi
  echo "$KAFKA_VERSION" >"$DATAVER"
}

# Our broker's pid, if it is alive (and really is our kafka.Kafka, not a recycled pid).
live_pid() {
  local pid
  pid="$(cat "$PIDFILE" 2>/dev/null || true)"
  [ -n "$pid" ] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "kafka.Kafka $CONF" || return 1
  echo "$pid"
}

port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# The broker really answers: TCP connect plus a metadata round trip (kcat), or, without kcat,
# TCP connect plus the broker's own "started" line.
answers() {
  port_open "$PORT" || return 1
  if command -v kcat >/dev/null 2>&1; then
    kcat -b "$BROKERS" -L -m 3 2>/dev/null | grep -q "broker 1 at 127.0.0.1:$PORT"
  else
    grep -q "Kafka Server started" "$LOGDIR/server.log" 2>/dev/null
  fi
}

wait_ready() {
  local pid="$1" deadline=$((SECONDS + TIMEOUT))
  until answers; do
    kill -0 "$pid" 2>/dev/null || { rm -f "$PIDFILE"; fail_with_log "Kafka exited during startup"; }
    if [ "$SECONDS" -ge "$deadline" ]; then
      fail_with_log "Kafka did not answer on $BROKERS within ${TIMEOUT}s (still running as pid $pid; 'scripts/kafka.sh stop' to end it)"
    fi
    sleep 0.5
  done
}

cmd_start() {
  ensure_rig_dir
  local pid
  if pid="$(live_pid)"; then
    local running_version
    running_version="$(cat "$VERFILE" 2>/dev/null || echo '?')"
    [ "$running_version" = "$KAFKA_VERSION" ] \
      || die "Kafka $running_version is running (pid $pid), but KAFKA_VERSION=$KAFKA_VERSION was asked for; run 'scripts/kafka.sh stop' first"
    conf_current \
      || die "Kafka is running (pid $pid) from $CONF, which differs from what $CONF_SRC/server.properties and the port settings give now; run 'scripts/kafka.sh stop' first"
    wait_ready "$pid"
    log "already running (Kafka $KAFKA_VERSION, pid $pid) on $BROKERS"
    return 0
  fi
  rm -f "$PIDFILE"
  local p
  for p in "$PORT" "$CPORT" "$PROXIED_PORT"; do
    ! port_open "$p" || die "port 127.0.0.1:$p is already in use by another process"
  done
  ensure_java
  ensure_libs
  write_conf
  ensure_formatted
  local -a opts
  mapfile -t opts < <(jvm_opts)
  log "starting Kafka $KAFKA_VERSION on $BROKERS (controller 127.0.0.1:$CPORT; logs in $LOGDIR)"
  : >"$LOGDIR/kafka.out"
  # setsid + nohup: the broker gets its own session and outlives the calling shell.
  setsid nohup "$JAVA" "${opts[@]}" -cp "$LIBS/*" kafka.Kafka "$CONF" \
    >"$LOGDIR/kafka.out" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$PIDFILE"
  echo "$KAFKA_VERSION" >"$VERFILE"
  wait_ready "$pid"
  log "ready: Kafka $KAFKA_VERSION (pid $pid) on $BROKERS"
}

cmd_stop() {
  local purge=0 purge_all=0 a
  for a in "$@"; do
    case "$a" in
      --purge) purge=1 ;;
      --purge-all) purge=1 purge_all=1 ;;
      *) die "stop: unknown argument $a" ;;
    esac
  done
  local pid
  if pid="$(live_pid)"; then
    log "stopping Kafka (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while kill -0 "$pid" 2>/dev/null; do
      if [ "$SECONDS" -ge "$deadline" ]; then
        log "still running after 30s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.5
        break
      fi
      sleep 0.2
    done
  else
    log "not running"
  fi
  rm -f "$PIDFILE" "$VERFILE"
  if [ "$purge" -eq 1 ]; then
    log "removing data and logs in $STATE"
    rm -rf "$DATA" "$LOGDIR" "$CONF" "$STATE/mvn.log"
  fi
  if [ "$purge_all" -eq 1 ]; then
    log "removing $STATE"
    rm -rf "$STATE"
  fi
}

cmd_status() {
  local pid
  if pid="$(live_pid)" && answers; then
    echo "kafka: running Kafka $(cat "$VERFILE" 2>/dev/null || echo '?') (pid $pid) on $BROKERS, controller 127.0.0.1:$CPORT, state $STATE"
    return 0
  fi
  echo "kafka: not running (state $STATE)"
  return 3
}

cmd_env() {
  echo "export WALRELAY_TEST_KAFKA_BROKERS=$BROKERS"
  echo "export WALRELAY_TEST_KAFKA_PROXIED=127.0.0.1:$PROXIED_PORT"
  echo "export WALRELAY_TEST_KAFKA_PROXY=127.0.0.1:$PROXY_PORT"
  # The jars 'start' fetched: test/e2e's TLS and SASL tests start a broker of their own from them.
  echo "export WALRELAY_TEST_KAFKA_LIBS='$LIBS'"
}

case "${1:-}" in
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  status) shift; cmd_status "$@" ;;
  env) shift; cmd_env "$@" ;;
  pid) live_pid || { echo "kafka.sh: not running" >&2; exit 3; } ;;
  runtime) ensure_rig_dir; ensure_java; ensure_libs; printf '%s\n%s\n' "$JAVA" "$LIBS" ;;
  *) echo "usage: $0 {start|stop [--purge|--purge-all]|status|env|pid|runtime}" >&2; exit 2 ;;
esac
