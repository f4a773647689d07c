#!/bin/sh
# Builds walrelay with its version stamped. The one build command of
# `make build`, the Dockerfile's build stage and test/deploy/image_test.go (which
# runs the Dockerfile's own RUN line), so the three cannot drift apart.
#
#   scripts/build.sh [OUTPUT]     default: bin/walrelay
#
# Environment:
#   VERSION      the version `walrelay version` and walrelay_build_info report;
#                default: `git describe --tags --always --dirty` when the source
#                is a git checkout; else none is stamped and walrelay reports
#                what Go recorded (the module version, or vcs.revision) or "dev"
#   GO           the go command (default: go)
#   CGO_ENABLED  as go reads it; the Dockerfile sets 0 for a static binary
set -eu
out="${1:-bin/walrelay}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
cd "$(dirname "$0")/.."
version="${VERSION:-}"
if [ -z "$version" ] && command -v git >/dev/null 2>&1; then
  version="$(git describe --tags --always --dirty 2>/dev/null || true)"
fi
case "$version" in
  *[!A-Za-z0-9._+~-]*) echo "build.sh: VERSION '$version' may hold only letters, digits and . _ + ~ -" >&2; exit 2 ;;
esac
exec "${GO:-go}" build -trimpath -ldflags "-s -w -X main.buildVersion=${version}" -o "$out" ./cmd/walrelay
