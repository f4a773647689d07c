#!/usr/bin/env bash
# walrelay test rig (DESIGN.md section 8): PostgreSQL (scripts/pg.sh), PgBouncer in front of it
# (scripts/pgbouncer.sh), Kafka (scripts/kafka.sh) and kcat.
#
#   scripts/rig.sh start            install kcat if missing, start PostgreSQL, PgBouncer and Kafka, wait until
#                                   all answer
#   scripts/rig.sh stop [--purge|--purge-all]
#                                   stop all (no-op for what is not running); --purge also removes their
#                                   data; --purge-all also removes the fetched Kafka jars
#   scripts/rig.sh status           status of each; exit 0 only if all run
#   scripts/rig.sh env              print the export lines; use as: eval "$(scripts/rig.sh env)"
#
# All knobs of pg.sh, pgbouncer.sh and kafka.sh apply (WALRELAY_RIG_DIR, WALRELAY_PG_PORT,
# WALRELAY_PGBOUNCER_PORT, WALRELAY_KAFKA_PORT, WALRELAY_KAFKA_CONTROLLER_PORT, KAFKA_VERSION, ...).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

log() { echo "rig.sh: $*" >&2; }

ensure_kcat() {
  command -v kcat >/dev/null 2>&1 && return 0
  if [ "$(id -u)" -ne 0 ]; then
    log "kcat is missing and we are not root (apt-get install -y kcat); continuing without it"
    return 0
  fi
  log "installing kcat (Debian package)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq kcat >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq kcat >/dev/null; }
  command -v kcat >/dev/null 2>&1 || { log "ERROR: kcat did not install"; exit 1; }
}

cmd_start() {
  ensure_kcat
  "$HERE/pg.sh" start
  "$HERE/pgbouncer.sh" start
  "$HERE/kafka.sh" start
  log "rig is up; for tests: eval \"\$($HERE/rig.sh env)\""
}

cmd_stop() {
  local rc=0
  "$HERE/kafka.sh" stop "$@" || rc=$?
  "$HERE/pgbouncer.sh" stop "$@" || rc=$?
  "$HERE/pg.sh" stop "$@" || rc=$?
  return "$rc"
}

cmd_status() {
  local rc=0
  "$HERE/pg.sh" status || rc=$?
  "$HERE/pgbouncer.sh" status || rc=$?
  "$HERE/kafka.sh" status || rc=$?
  return "$rc"
}

cmd_env() {
  "$HERE/pg.sh" env
  "$HERE/pgbouncer.sh" env
  "$HERE/kafka.sh" env
}

case "${1:-}" in
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  status) shift; cmd_status "$@" ;;
  env) shift; cmd_env "$@" ;;
  *) echo "usage: $0 {start|stop [--purge|--purge-all]|status|env}" >&2; exit 2 ;;
esac
