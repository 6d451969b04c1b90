#!/usr/bin/env bash
# Installs what building and testing Capstan needs, if it is missing:
# protoc (to compile the .proto files), etcdctl and etcd (real etcd clients
# and a reference server for tests and benchmarks), all from Debian.
set -euo pipefail

need=()
command -v protoc >/dev/null 2>&1 || need+=(protobuf-compiler)
command -v etcdctl >/dev/null 2>&1 || need+=(etcd-client)
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v curl >/dev/null 2>&1 || need+=(curl)

if ((${#need[@]})); then
  echo "installing: ${need[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  # Keep the packaged etcd service from starting and taking port 2379.
  export RUNLEVEL=1
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is missing: install a Rust toolchain (rustup) first" >&2
  exit 1
fi
