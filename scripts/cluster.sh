#!/usr/bin/env bash
# A local replicated control plane on loopback: three capstan-store members
# and two capstan-apiservers, each apiserver talking to all three members.
# Data and logs under $DATA (default data/cluster). Ctrl-C stops everything.
#
#   store members:  127.0.0.1:12379, 22379, 32379  (peers on 12380, 22380, 32380)
#   apiservers:     127.0.0.1:18080, 28080
set -euo pipefail

BIN=${BIN:-target/release}
DATA=${DATA:-data/cluster}
mkdir -p "$DATA"

initial=""
for i in 1 2 3; do
  initial+="${initial:+,}m$i=http://127.0.0.1:${i}2380"
done
etcd_servers="http://127.0.0.1:12379,http://127.0.0.1:22379,http://127.0.0.1:32379"

pids=()
stop() {
  echo "stopping ${#pids[@]} processes"
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap stop EXIT

for i in 1 2 3; do
  "$BIN/capstan-store" --name "m$i" --data-dir "$DATA/m$i" \
    --listen-client-urls "http://127.0.0.1:${i}2379" \
    --listen-peer-urls "http://127.0.0.1:${i}2380" \
    --initial-cluster "$initial" >"$DATA/m$i.log" 2>&1 &
  pids+=($!)
done
for i in 1 2 3; do
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:${i}2379/health" >/dev/null && break
    sleep 0.1
  done
done
for i in 1 2; do
  "$BIN/capstan-apiserver" --etcd-servers "$etcd_servers" --secure-port 0 --insecure-port "${i}8080" \
    >"$DATA/apiserver$i.log" 2>&1 &
  pids+=($!)
done

cat <<INFO
store:      ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:12379,127.0.0.1:22379,127.0.0.1:32379 endpoint status -w table
apiservers: kubectl -s http://127.0.0.1:18080 get ns   (or :28080)
logs:       $DATA/*.log
INFO
wait
