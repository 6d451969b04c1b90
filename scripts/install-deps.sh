#!/usr/bin/env bash
# Installs what testing and benchmarking Capstan needs, if it is missing:
# etcdctl and etcd (a real etcd client and a reference server), kubectl, and
# python3 with venv (the official Python client is tested), all from Debian. Building needs nothing from the system besides a Rust
# toolchain and a C compiler: protoc comes from the protoc-bin-vendored crate
# (see scripts/protoc and .cargo/config.toml).
set -euo pipefail

need=()
command -v etcdctl >/dev/null 2>&1 || need+=(etcd-client)
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v curl >/dev/null 2>&1 || need+=(curl)
# The Python client tests make a venv (`python3 -m venv`), which on Debian
# needs python3-venv (ensurepip) besides python3.
command -v python3 >/dev/null 2>&1 || need+=(python3)
python3 -c 'import ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
# The encryption test seals and opens values in kube-apiserver's format with
# Python's `cryptography`, independently of Capstan's code.
python3 -c 'import cryptography' >/dev/null 2>&1 || need+=(python3-cryptography)
# Machines of this kind come with kubectl 1.32; where it is missing, Debian's
# own kubectl (package kubernetes-client, an older 1.20) is the fallback.
command -v kubectl >/dev/null 2>&1 || need+=(kubernetes-client)
# The fault tests cut members apart with iptables rules matched by cgroup
# (tests/support/faults); machines of this kind do not come with it.
# (CAPSTAN_FAULT_PARTITIONS=0 leaves partitions out where rules cannot be set.)
command -v iptables >/dev/null 2>&1 || [ -x /usr/sbin/iptables ] || need+=(iptables)

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
