#!/usr/bin/env bash
# Test-rig PgBouncer for walrelay: Debian's package `pgbouncer` (1.18 on bookworm), one process in
# front of the rig's PostgreSQL (scripts/pg.sh), for the tests of walrelay behind a pooler.
#
#   scripts/pgbouncer.sh start          install pgbouncer if missing, write its ini, start it, wait until it answers
#   scripts/pgbouncer.sh stop [--purge] stop (no-op if not running); --purge (or --purge-all) also removes its folder
#   scripts/pgbouncer.sh status         exit 0 if running and answering (SELECT 1 through walrelay_tx), 3 if not
#   scripts/pgbouncer.sh env            print: export WALRELAY_TEST_PGBOUNCER_TX_URL=...,
#                                       WALRELAY_TEST_PGBOUNCER_SESSION_URL=... and WALRELAY_TEST_PGBOUNCER_LOG
#
# One process, one port, two logical databases, both the rig's database (the host, port, database
# and user of pg.sh's WALRELAY_TEST_PG_URL) with a pool mode each ([databases] pool_mode=):
#   walrelay_tx        pool_mode=transaction   a server connection per transaction
#   walrelay_session   pool_mode=session       a server connection per client connection
# No user= on them: PgBouncer logs into PostgreSQL as the user the client names (one pool per
# user and database), so the least-privilege tests reach the server as their own roles.
#
# Authentication: auth_type = trust; PgBouncer 1.18 still wants each user in auth_file, so the
# users the tests create at run time are looked up with auth_query (as auth_user, the rig's
# superuser, over the rig's trust auth). The query returns no password (trust needs none, and
# PostgreSQL trusts loopback) and skips PostgreSQL's rolcanlogin and rolvaliduntil, so PostgreSQL,
# not the pooler, refuses a role that may not log in, with its own error text. A role that does
# not exist gets PgBouncer's "no such user". (auth_type = any would need a user= per database:
# every client would reach the server as that one user.) The rig's user is also in admin_users:
# the console is the database `pgbouncer` on the same port (SHOW POOLS, RECONNECT, PAUSE ...).
#
# Startup parameters: only extra_float_digits is ignored (ignore_startup_parameters). PgBouncer
# itself accepts client_encoding, datestyle, timezone, standard_conforming_strings and
# application_name; any other one (options, replication, search_path ...) it refuses at connect
# time, on purpose: walrelay must cope with a pooler that does.
#
# Environment:
#   WALRELAY_RIG_DIR                  state root (default <repo>/.rig); this one lives in $WALRELAY_RIG_DIR/pgbouncer
#                                     (pgbouncer.ini, userlist.txt, pgbouncer.pid, pgbouncer.log, sock/)
#   WALRELAY_PGBOUNCER_PORT           port on 127.0.0.1 (default 26432: below the ephemeral port range,
#                                     as the fault suite restarts PostgreSQL behind it mid-run)
#   WALRELAY_PGBOUNCER_START_TIMEOUT  seconds to wait for it to answer (default 30)
#   WALRELAY_PG_PORT, PG_MAJOR, ...   as for scripts/pg.sh: they name the PostgreSQL behind it
# As root, pgbouncer (which refuses to run as root) runs as the user pg.sh runs PostgreSQL as:
# `postgres`, or `walrelay-pg` if there is none. The package's own service (/etc/pgbouncer,
# port 6432) is not used; if installing the package started it, start stops it again.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RIG_DIR="${WALRELAY_RIG_DIR:-$REPO/.rig}"
STATE="$RIG_DIR/pgbouncer"
INI="$STATE/pgbouncer.ini"
AUTH_FILE="$STATE/userlist.txt"
PIDFILE="$STATE/pgbouncer.pid"
LOG="$STATE/pgbouncer.log"
SOCK="$STATE/sock"
PORT="${WALRELAY_PGBOUNCER_PORT:-26432}"
TIMEOUT="${WALRELAY_PGBOUNCER_START_TIMEOUT:-30}"
PGBOUNCER=/usr/sbin/pgbouncer
# Debian's PostgreSQL clients, which pg.sh installs (WALRELAY_TEST_PG_BIN may be a server-only bin/).
CLIENTBIN="/usr/lib/postgresql/15/bin"

log() { echo "pgbouncer.sh: $*" >&2; }
die() { echo "pgbouncer.sh: ERROR: $*" >&2; exit 1; }

fail_with_log() {
  echo "pgbouncer.sh: ERROR: $*" >&2
  local f
  for f in "$STATE/start.out" "$LOG"; do
    if [ -s "$f" ]; then
      echo "----- last 40 lines of $f -----" >&2
      tail -n 40 "$f" >&2 || true
    fi
  done
  echo "-----" >&2
  exit 1
}

# The PostgreSQL behind it: what pg.sh's WALRELAY_TEST_PG_URL names.
PG_URL="$("$REPO/scripts/pg.sh" env | sed -n "s/^export WALRELAY_TEST_PG_URL='\(.*\)'\$/\1/p")"
[[ "$PG_URL" =~ ^postgres(ql)?://([^:@/]+)(:[^@/]*)?@([^:/]+):([0-9]+)/([^?]+) ]] \
  || die "cannot read user, host, port and database from pg.sh's WALRELAY_TEST_PG_URL ($PG_URL)"
PG_USER="${BASH_REMATCH[2]}"
PG_HOST="${BASH_REMATCH[4]}"
PG_PORT="${BASH_REMATCH[5]}"
PG_DB="${BASH_REMATCH[6]}"
TX_URL="postgres://$PG_USER@127.0.0.1:$PORT/walrelay_tx?sslmode=disable"
SESSION_URL="postgres://$PG_USER@127.0.0.1:$PORT/walrelay_session?sslmode=disable"

# The same owner as pg.sh's cluster (root may not run pgbouncer).
OS_USER="$(id -un)"
pick_owner() {
  [ "$(id -u)" -eq 0 ] || return 0
  if id -u postgres >/dev/null 2>&1; then
    OS_USER=postgres
  else
    OS_USER=walrelay-pg
    if ! id -u "$OS_USER" >/dev/null 2>&1; then
      log "creating system user $OS_USER to run pgbouncer"
      useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$OS_USER"
    fi
  fi
}
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u "$OS_USER" -- "$@"
  else
    "$@"
  fi
}

ensure_installed() {
  [ -x "$PGBOUNCER" ] && return 0
  [ "$(id -u)" -eq 0 ] || die "$PGBOUNCER is missing and we are not root: apt-get install -y pgbouncer"
  log "installing pgbouncer (Debian package)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq pgbouncer >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq pgbouncer >/dev/null; }
  [ -x "$PGBOUNCER" ] || die "pgbouncer installed but $PGBOUNCER is still missing"
  # Where services may start (no policy-rc.d forbidding it), the install starts the package's
  # service (/etc/pgbouncer/pgbouncer.ini, port 6432). The rig never uses it: stop it again.
  if /etc/init.d/pgbouncer status >/dev/null 2>&1; then
    log "stopping the pgbouncer service the install started (the rig runs its own)"
    invoke-rc.d pgbouncer stop >/dev/null 2>&1 || /etc/init.d/pgbouncer stop >/dev/null 2>&1 || true
  fi
}

ensure_rig_dir() {
  if [ ! -d "$RIG_DIR" ]; then
    mkdir -p "$RIG_DIR"
    chmod 0755 "$RIG_DIR"
  fi
  # Keep the state folder out of git without touching the repo's .gitignore.
  [ -f "$RIG_DIR/.gitignore" ] || printf '*\n' >"$RIG_DIR/.gitignore"
  mkdir -p "$STATE" "$SOCK"
  if [ "$(id -u)" -eq 0 ]; then
    chown -R "$OS_USER:" "$STATE"
    as_owner test -w "$STATE" || die "user $OS_USER cannot reach $STATE (a parent folder is not traversable); set WALRELAY_RIG_DIR to e.g. /tmp/walrelay-rig"
  fi
}

render_conf() {
  cat <<EOF
;; written by scripts/pgbouncer.sh on every start; do not edit (see its header for the choices)
[databases]
walrelay_tx = host=$PG_HOST port=$PG_PORT dbname=$PG_DB pool_mode=transaction
walrelay_session = host=$PG_HOST port=$PG_PORT dbname=$PG_DB pool_mode=session

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PORT
unix_socket_dir = $SOCK
pidfile = $PIDFILE
logfile = $LOG
auth_type = trust
auth_file = $AUTH_FILE
auth_user = $PG_USER
auth_query = SELECT rolname, NULL::text FROM pg_catalog.pg_roles WHERE rolname = \$1
admin_users = $PG_USER
ignore_startup_parameters = extra_float_digits
max_client_conn = 200
default_pool_size = 10
EOF
}

# The running process was started from $INI; it is current if $INI is what we would write now.
conf_current() {
  [ -f "$INI" ] && render_conf | cmp -s - "$INI"
}

write_conf() {
  # A Unix socket path has room for 107 bytes.
  [ "${#SOCK}" -le 90 ] || die "$SOCK is too long a path for a Unix socket; set WALRELAY_RIG_DIR to a shorter one"
  render_conf | as_owner tee "$INI" >/dev/null
  printf '"%s" ""\n' "$PG_USER" | as_owner tee "$AUTH_FILE" >/dev/null
}

# Our pgbouncer's pid, if it is alive (and really runs our ini, not a recycled pid).
live_pid() {
  local pid
  pid="$(cat "$PIDFILE" 2>/dev/null || true)"
  [ -n "$pid" ] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$INI" || return 1
  echo "$pid"
}

port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# It answers: a query through walrelay_tx reaches PostgreSQL and comes back. (With PostgreSQL
# down, pgbouncer holds a query for query_wait_timeout, 120s by default: hence timeout 5.)
answers() {
  [ "$(PGCONNECT_TIMEOUT=3 timeout 5 "$CLIENTBIN/psql" -X -At -w "$TX_URL" -c 'SELECT 1' 2>/dev/null)" = 1 ]
}

# wait_ready [LOG_OFFSET]: until it answers. What it logged after LOG_OFFSET bytes fails at once:
# a FATAL line (pgbouncer exits after one, removing its pidfile), or a port it could not bind
# (1.18 only warns, and runs on with its Unix socket alone: stopped here).
wait_ready() {
  local deadline=$((SECONDS + TIMEOUT)) offset="${1:-}" pid
  until answers; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      fail_with_log "pgbouncer did not answer on 127.0.0.1:$PORT within ${TIMEOUT}s (is PostgreSQL up? scripts/pg.sh status; still running: 'scripts/pgbouncer.sh stop' ends it)"
    fi
    if [ -n "$offset" ]; then
      if tail -c +"$((offset + 1))" "$LOG" 2>/dev/null | grep -q ' FATAL '; then
        fail_with_log "pgbouncer exited during startup"
      fi
      if tail -c +"$((offset + 1))" "$LOG" 2>/dev/null | grep -q "cannot listen on 127.0.0.1:$PORT"; then
        if pid="$(live_pid)"; then kill -TERM "$pid" 2>/dev/null || true; fi
        fail_with_log "pgbouncer could not listen on 127.0.0.1:$PORT (stopped it again)"
      fi
    fi
    sleep 0.2
  done
  live_pid >/dev/null || fail_with_log "something answers on 127.0.0.1:$PORT, but not the pgbouncer of $PIDFILE"
}

cmd_start() {
  pick_owner
  ensure_installed
  [ -x "$CLIENTBIN/psql" ] || die "$CLIENTBIN/psql is missing: scripts/pg.sh start installs it"
  local pid
  if pid="$(live_pid)"; then
    conf_current \
      || die "pgbouncer is running (pid $pid) from $INI, which differs from what this script and the port settings give now; run 'scripts/pgbouncer.sh stop' first"
    wait_ready
    log "already running (pid $pid) on 127.0.0.1:$PORT"
    return 0
  fi
  rm -f "$PIDFILE"
  ! port_open "$PORT" || die "port 127.0.0.1:$PORT is already in use by another process (WALRELAY_PGBOUNCER_PORT)"
  ensure_rig_dir
  write_conf
  log "starting $("$PGBOUNCER" --version | head -n 1) on 127.0.0.1:$PORT (log: $LOG)"
  # -d: pgbouncer daemonizes and writes $PIDFILE; setsid: it outlives the calling shell/job.
  local -a runas=()
  [ "$(id -u)" -ne 0 ] || runas=(runuser -u "$OS_USER" --)
  local offset=0
  [ ! -f "$LOG" ] || offset="$(stat -c %s "$LOG")"
  setsid -w "${runas[@]}" "$PGBOUNCER" -d "$INI" >"$STATE/start.out" 2>&1 </dev/null \
    || fail_with_log "pgbouncer did not start"
  wait_ready "$offset"
  log "ready (pid $(live_pid)): $TX_URL, $SESSION_URL"
}

cmd_stop() {
  local purge=0 a
  for a in "$@"; do
    case "$a" in
      --purge | --purge-all) purge=1 ;;
      *) die "stop: unknown argument $a" ;;
    esac
  done
  local pid
  if pid="$(live_pid)"; then
    # SIGTERM: immediate shutdown (the console's SHUTDOWN); clients are disconnected.
    log "stopping pgbouncer (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while kill -0 "$pid" 2>/dev/null; do
      if [ "$SECONDS" -ge "$deadline" ]; then
        log "still running after 30s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.5
        break
      fi
      sleep 0.1
    done
  else
    log "not running"
  fi
  rm -f "$PIDFILE"
  if [ "$purge" -eq 1 ] && [ -e "$STATE" ]; then
    log "removing $STATE"
    rm -rf "$STATE"
  fi
}

cmd_status() {
  local pid
  if pid="$(live_pid)"; then
    if answers; then
      echo "pgbouncer: running (pid $pid) on 127.0.0.1:$PORT, walrelay_tx and walrelay_session -> $PG_HOST:$PG_PORT/$PG_DB, state $STATE"
      return 0
    fi
    echo "pgbouncer: running (pid $pid) on 127.0.0.1:$PORT but not answering: is PostgreSQL ($PG_HOST:$PG_PORT) up?"
    return 3
  fi
  echo "pgbouncer: not running (state $STATE)"
  return 3
}

cmd_env() {
  echo "export WALRELAY_TEST_PGBOUNCER_TX_URL='$TX_URL'"
  echo "export WALRELAY_TEST_PGBOUNCER_SESSION_URL='$SESSION_URL'"
  echo "export WALRELAY_TEST_PGBOUNCER_LOG='$LOG'"
}

case "${1:-}" in
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  status) shift; cmd_status "$@" ;;
  env) shift; cmd_env "$@" ;;
  *) echo "usage: $0 {start|stop [--purge]|status|env}" >&2; exit 2 ;;
esac
