#!/usr/bin/env bash
# Prints the path of a docker-compose, for validating docker-compose.yml
# (test/deploy/compose_test.go runs `docker-compose config`, which needs no Docker
# engine). Idempotent.
#
#   scripts/docker-compose.sh    print the path (installing it first when missing)
#
# Environment:
#   WALRELAY_COMPOSE_NO_INSTALL=1  only look; exit 3 when docker-compose is missing
#
# Order: docker-compose on PATH; else Debian's docker-compose package (1.29.2,
# Python), installed with apt-get without its recommended docker.io: the
# tests need the file parser and validator, not an engine.
set -euo pipefail

log() { echo "docker-compose.sh: $*" >&2; }
die() { echo "docker-compose.sh: ERROR: $*" >&2; exit 1; }

if command -v docker-compose >/dev/null 2>&1; then
  command -v docker-compose
  exit 0
fi
if [ "${WALRELAY_COMPOSE_NO_INSTALL:-}" = 1 ]; then
  log "docker-compose is missing (not installing: WALRELAY_COMPOSE_NO_INSTALL=1)"
  exit 3
fi
command -v apt-get >/dev/null || die "docker-compose is missing and apt-get is not available: install docker-compose"
[ "$(id -u)" -eq 0 ] || die "docker-compose is missing: run 'apt-get install docker-compose' as root"
if ! apt-cache show docker-compose >/dev/null 2>&1; then
  log "apt-get update"
  apt-get update -qq >&2
fi
log "installing Debian's docker-compose package"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose >&2 \
  || die "apt-get install docker-compose failed"
command -v docker-compose || die "docker-compose is not on PATH after installing it"
