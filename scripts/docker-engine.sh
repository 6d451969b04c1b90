#!/usr/bin/env bash
# Shared by the container tests (test-fresh.sh, compose-test.sh): makes sure a
# Docker engine answers and that the local Debian base image exists. Docker
# Hub may be out of reach, so the base image is made here with debootstrap
# and `docker import`.
#
#   source scripts/docker-engine.sh
#   docker_engine_or_skip NAME     # returns 1 (with a message) when no engine can run
#   ensure_base_image              # capstan-base:bookworm
set -euo pipefail

BASE_IMAGE="${CAPSTAN_BASE_IMAGE:-capstan-base:bookworm}"
IMAGES_DIR="${CAPSTAN_IMAGES_DIR:-${TMPDIR:-/tmp}/capstan-images}"

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

apt_install() {
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

docker_engine_or_skip() {
  local who="$1"
  if docker info >/dev/null 2>&1; then return 0; fi
  if ! command -v dockerd >/dev/null 2>&1; then
    echo "$who: installing docker.io"
    apt_install docker.io docker-compose || true
  fi
  if command -v dockerd >/dev/null 2>&1 && ! docker info >/dev/null 2>&1; then
    echo "$who: starting dockerd (log: ${TMPDIR:-/tmp}/capstan-dockerd.log)"
    as_root sh -c "nohup dockerd >'${TMPDIR:-/tmp}/capstan-dockerd.log' 2>&1 &"
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  fi
  if ! docker info >/dev/null 2>&1; then
    echo "$who: SKIPPED: no Docker engine could be started here"
    return 1
  fi
}

ensure_base_image() {
  if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then return 0; fi
  command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
  local rootfs="$IMAGES_DIR/bookworm-rootfs"
  echo "building $BASE_IMAGE with debootstrap (a few minutes, once)"
  as_root rm -rf "$rootfs"
  mkdir -p "$IMAGES_DIR"
  as_root debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian >"$IMAGES_DIR/debootstrap.log" 2>&1 \
    || { echo "debootstrap failed, see $IMAGES_DIR/debootstrap.log" >&2; return 1; }
  as_root tar -C "$rootfs" -c . | docker import - "$BASE_IMAGE" >/dev/null
}
