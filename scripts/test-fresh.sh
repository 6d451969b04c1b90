#!/usr/bin/env bash
# Proves the README's two commands on a clean machine of this kind, in a
# fresh container: a fresh clone of what is committed, a Debian bookworm with
# only what a new machine of this kind has (a C compiler, make, git, python3,
# kubectl, and the host's Rust toolchain mounted read-only), nothing left over
# from this machine (no cargo registry, no target/, no protoc, no etcd).
#
#   scripts/test-fresh.sh [run|test|all]      (make test-fresh runs `all`)
#
# `run`: `make run` must build and start, and kubectl must answer through the
# kubeconfig it writes. `test`: `make test` must pass. The host's CA
# certificates are mounted so HTTPS to the package registries verifies inside
# as it does outside. Skips (exit 0, with a message) when no Docker engine can
# be started.
set -euo pipefail
what="${1:-all}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/docker-engine.sh"
docker_engine_or_skip test-fresh || exit 0
ensure_base_image

machine_image=capstan-machine:rust-no-iptables
if ! docker image inspect "$machine_image" >/dev/null 2>&1; then
  echo "test-fresh: building $machine_image (what a new machine of this kind has)"
  ctx="$(mktemp -d)"
  cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $BASE_IMAGE
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      gcc g++ libc6-dev make git ca-certificates python3 procps iproute2 sudo >/dev/null \
 && rm -rf /var/lib/apt/lists/*
DOCKERFILE
  docker build -q -t "$machine_image" "$ctx" >/dev/null
  rm -rf "$ctx"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/capstan-fresh.XXXXXX")"
trap 'rm -rf "$work"' EXIT
git clone -q "$root" "$work/capstan"
echo "test-fresh: a fresh clone of $(git -C "$root" rev-parse --short HEAD) in a new container"

rustup_home="${RUSTUP_HOME:-$HOME/.rustup}"
cargo_bin="${CARGO_HOME:-$HOME/.cargo}/bin"
# The machine image's kubectl may be a dispatcher in front of versioned
# binaries; mount the real 1.32 binary when there is one.
kubectl_bin="$(readlink -f "$(command -v kubectl)")"
[ -x "$kubectl_bin.1.32" ] && kubectl_bin="$kubectl_bin.1.32"

inside='
set -euo pipefail
cd /src/capstan
if [ "$WHAT" = run ] || [ "$WHAT" = all ]; then
  echo "--- make run"
  make run >/tmp/make-run.log 2>&1 &
  for i in $(seq 1 5400); do  # a release build from nothing on a busy 2-core machine is slow
    if [ -f data/kubeconfig ] && kubectl --kubeconfig data/kubeconfig get ns >/tmp/ns.txt 2>/dev/null; then break; fi
    if ! kill -0 $! 2>/dev/null; then echo "make run exited:"; tail -40 /tmp/make-run.log; exit 1; fi
    sleep 1
  done
  if ! grep -qs kube-system /tmp/ns.txt; then echo "kubectl did not answer within 90 minutes"; tail -40 /tmp/make-run.log; exit 1; fi
  cat /tmp/ns.txt
  kubectl --kubeconfig data/kubeconfig create configmap fresh --from-literal=ok=yes
  kubectl --kubeconfig data/kubeconfig get configmap fresh -o jsonpath="{.data.ok}{\"\n\"}"
  pkill -INT -f "target/release/capstan " || true
  wait || true
  echo "--- make run: kubectl answered"
fi
if [ "$WHAT" = test ] || [ "$WHAT" = all ]; then
  echo "--- make test"
  make test
  echo "--- make test passed"
fi
'
docker run --rm --cap-add NET_ADMIN --cap-add SYS_ADMIN \
  -e WHAT="$what" -e CI=true \
  `# a container cannot write the host's cgroups, which the partition faults use` \
  -e CAPSTAN_FAULT_PARTITIONS=0 \
  -e RUSTUP_HOME=/opt/rustup -e CARGO_HOME=/root/.cargo \
  -e PATH=/opt/cargo-bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  -e CARGO_HTTP_CAINFO=/etc/ssl/certs/ca-certificates.crt \
  -v "$rustup_home:/opt/rustup:ro" -v "$cargo_bin:/opt/cargo-bin:ro" \
  -v "$kubectl_bin:/usr/local/bin/kubectl:ro" \
  -v /etc/ssl/certs:/etc/ssl/certs:ro \
  -v "$work/capstan:/src/capstan" \
  "$machine_image" bash -c "$inside"
echo "test-fresh: passed ($what)"
