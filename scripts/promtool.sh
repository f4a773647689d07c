#!/usr/bin/env bash
# Prints the path of a promtool, for checking and unit-testing the shipped
# Prometheus rules (deploy/prometheus). Idempotent.
#
#   scripts/promtool.sh          print the path (installing promtool first when missing)
#   scripts/promtool.sh prometheus  the same for the Prometheus server of the same package
#                                (scripts/demo-outage.sh runs one)
#
# Environment:
#   WALRELAY_RIG_DIR               state root (default: <repo>/.rig)
#   WALRELAY_PROMTOOL_NO_INSTALL=1 only look; exit 3 when promtool is missing
#
# Order: promtool on PATH; else $WALRELAY_RIG_DIR/bin/promtool (default <repo>/.rig/bin);
# else fetch Debian's `prometheus` package with apt-get and unpack only its
# promtool into that folder.
#
# Why unpack instead of `apt-get install prometheus`: the package brings the
# Prometheus server, a system user, a service that starts itself where no
# policy-rc.d forbids it, and eleven JavaScript and font dependencies (96 MB
# installed). The tests need the one static promtool binary of the same package.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RIG_DIR="${WALRELAY_RIG_DIR:-$REPO/.rig}"
NAME="${1:-promtool}"
case "$NAME" in promtool|prometheus) ;; *) echo "usage: scripts/promtool.sh [promtool|prometheus]" >&2; exit 2 ;; esac
DEST="$RIG_DIR/bin/$NAME"

log() { echo "promtool.sh: $*" >&2; }
die() { echo "promtool.sh: ERROR: $*" >&2; exit 1; }

if command -v "$NAME" >/dev/null 2>&1; then
  command -v "$NAME"
  exit 0
fi
if [ -x "$DEST" ]; then
  echo "$DEST"
  exit 0
fi

if [ "${WALRELAY_PROMTOOL_NO_INSTALL:-}" = 1 ]; then
  log "$NAME is missing (not installing: WALRELAY_PROMTOOL_NO_INSTALL=1)"
  exit 3
fi
command -v apt-get >/dev/null || die "promtool is missing and apt-get is not available: install Prometheus's promtool"
command -v dpkg-deb >/dev/null || die "promtool is missing and dpkg-deb is not available"

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
if [ "$(id -u)" -eq 0 ] && id -u _apt >/dev/null 2>&1; then
  chown _apt "$TMP" # apt downloads as its sandbox user _apt
fi

if ! apt-cache show prometheus >/dev/null 2>&1; then
  [ "$(id -u)" -eq 0 ] || die "the prometheus package is unknown to apt: run 'apt-get update' as root"
  log "apt-get update"
  apt-get update -qq >&2
fi
log "fetching Debian's prometheus package for its $NAME"
(cd "$TMP" && apt-get download -q prometheus >&2) || die "apt-get download prometheus failed"
dpkg-deb -x "$TMP"/prometheus_*.deb "$TMP/root"
[ -x "$TMP/root/usr/bin/$NAME" ] || die "the prometheus package holds no usr/bin/$NAME"
mkdir -p "$(dirname "$DEST")"
install -m 0755 "$TMP/root/usr/bin/$NAME" "$DEST.tmp"
mv "$DEST.tmp" "$DEST"
log "installed $("$DEST" --version 2>&1 | head -1) at $DEST"
echo "$DEST"
