#!/usr/bin/env bash
# `make compose-test`: compose.yaml brought up for real on this machine's
# Docker engine and driven with kubectl and etcdctl from the host
# (scripts/compose_scenario.py says what is checked and measured).
#
# Docker Hub may be out of reach here, so the images are built locally: the
# release binaries on a Debian base made by debootstrap (deploy/Dockerfile.prebuilt)
# and Debian's HAProxy (deploy/haproxy.Dockerfile). Users elsewhere get the
# same shape from `docker compose up --build` with public base images.
# Skips (exit 0, with a message) when no Docker engine can be started.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
source scripts/docker-engine.sh
docker_engine_or_skip compose-test || exit 0
ensure_base_image
command -v docker-compose >/dev/null 2>&1 || apt_install docker-compose
./scripts/install-deps.sh

# CAPSTAN_COMPOSE_PROFILE=debug uses the debug binaries (quicker to build).
profile="${CAPSTAN_COMPOSE_PROFILE:-release}"
if [ "$profile" = release ]; then cargo build --release --bins; else cargo build --bins; fi
ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
cp "target/$profile/capstan" "target/$profile/capstan-store" "target/$profile/capstan-apiserver" \
  "target/$profile/capstan-scheduler" "target/$profile/capstan-nodes" "$ctx/"
echo "compose-test: building capstan:latest and capstan-haproxy:latest on $BASE_IMAGE"
docker build -q -f deploy/Dockerfile.prebuilt --build-arg RUNTIME_IMAGE="$BASE_IMAGE" -t capstan:latest "$ctx" >/dev/null
docker build -q -f deploy/haproxy.Dockerfile --build-arg BASE_IMAGE="$BASE_IMAGE" -t capstan-haproxy:latest deploy >/dev/null

python3 scripts/compose_scenario.py "$@"
