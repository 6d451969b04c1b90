#!/usr/bin/env bash
# A local replicated control plane on loopback: three capstan-store members
# and two capstan-apiservers, each apiserver talking to all three members
# and running kube-scheduler in its process (one leads, on the Lease
# kube-system/kube-scheduler), and capstan-nodes with $NODES simulated
# nodes (default 3) across three zones,
# everything over TLS with certificates made on first start under
# $DATA/pki (`capstan certificates`, kept on later starts), Secrets
# encrypted at rest with the secretbox key it writes there too
# ($DATA/pki/encryption-config.yaml, shared by both apiservers). Data and
# logs under $DATA (default data/cluster). Ctrl-C stops everything.
#
#   store members:  https://127.0.0.1:12379, 22379, 32379  (peers on 12380, 22380, 32380)
#   apiservers:     https://127.0.0.1:16443, 26443
#   nodes:          kubelet API https://127.0.0.1:10250, admin http://127.0.0.1:10248/nodes
set -euo pipefail

BIN=${BIN:-target/release}
DATA=${DATA:-data/cluster}
NODES=${NODES:-3}
PKI=$DATA/pki
mkdir -p "$DATA"

members=()
initial=""
for i in 1 2 3; do
  members+=(--store-member "m$i=127.0.0.1,localhost")
  initial+="${initial:+,}m$i=https://127.0.0.1:${i}2380"
done
"$BIN/capstan" certificates --dir "$PKI" "${members[@]}" --server https://127.0.0.1:16443
etcd_servers="https://127.0.0.1:12379,https://127.0.0.1:22379,https://127.0.0.1:32379"
store_client=(--cacert "$PKI/etcd/ca.crt" --cert "$PKI/etcd/client.crt" --key "$PKI/etcd/client.key")

pids=()
stop() {
  echo "stopping ${#pids[@]} processes"
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap stop EXIT

for i in 1 2 3; do
  "$BIN/capstan-store" --name "m$i" --data-dir "$DATA/m$i" \
    --listen-client-urls "https://127.0.0.1:${i}2379" \
    --listen-peer-urls "https://127.0.0.1:${i}2380" \
    --initial-cluster "$initial" \
    --cert-file "$PKI/etcd/m$i.crt" --key-file "$PKI/etcd/m$i.key" \
    --trusted-ca-file "$PKI/etcd/ca.crt" --client-cert-auth \
    --peer-cert-file "$PKI/etcd/m$i.crt" --peer-key-file "$PKI/etcd/m$i.key" \
    --peer-trusted-ca-file "$PKI/etcd/ca.crt" --peer-client-cert-auth \
    >"$DATA/m$i.log" 2>&1 &
  pids+=($!)
done
for i in 1 2 3; do
  for _ in $(seq 100); do
    curl -sf "${store_client[@]}" "https://127.0.0.1:${i}2379/health" >/dev/null && break
    sleep 0.1
  done
done
# The aggregator's front proxy (kubeadm's flags): how metrics.k8s.io on
# the simulated nodes learns who the caller of `kubectl top` is.
front_proxy=(--proxy-client-cert-file "$PKI/front-proxy-client.crt"
  --proxy-client-key-file "$PKI/front-proxy-client.key"
  --requestheader-client-ca-file "$PKI/front-proxy-ca.crt"
  --requestheader-allowed-names front-proxy-client
  --requestheader-username-headers X-Remote-User
  --requestheader-group-headers X-Remote-Group
  --requestheader-extra-headers-prefix X-Remote-Extra-)
for i in 1 2; do
  "$BIN/capstan-apiserver" --etcd-servers "$etcd_servers" --secure-port "${i}6443" \
    --bind-address 127.0.0.1 \
    --etcd-cafile "$PKI/etcd/ca.crt" --etcd-certfile "$PKI/etcd/client.crt" \
    --etcd-keyfile "$PKI/etcd/client.key" \
    --tls-cert-file "$PKI/serving.crt" --tls-private-key-file "$PKI/serving.key" \
    --client-ca-file "$PKI/client-ca.crt" \
    --service-account-key-file "$PKI/service-account.key" \
    --service-account-signing-key-file "$PKI/service-account.key" \
    --encryption-provider-config "$PKI/encryption-config.yaml" \
    "${front_proxy[@]}" \
    --kubelet-client-certificate "$PKI/kubelet-client.crt" \
    --kubelet-client-key "$PKI/kubelet-client.key" \
    >"$DATA/apiserver$i.log" 2>&1 &
  pids+=($!)
done

for i in 1 2; do
  for _ in $(seq 300); do
    curl -sf --cacert "$PKI/server-ca.crt" "https://127.0.0.1:${i}6443/readyz" >/dev/null && break
    sleep 0.1
  done
done
# The nodes run as their own identity (system:capstan-nodes, from
# nodes.kubeconfig), not as the admin: the admin first lets that identity
# impersonate exactly these nodes' users, then the Node authorizer and
# NodeRestriction hold each node's writes to its own objects.
"$BIN/capstan-nodes" --kubeconfig "$PKI/kubeconfig" --nodes "$NODES" \
  --grant-impersonation-to system:capstan-nodes >>"$DATA/nodes.log" 2>&1
"$BIN/capstan-nodes" --kubeconfig "$PKI/nodes.kubeconfig" --nodes "$NODES" \
  --zones zone-a,zone-b,zone-c --kubelet-port 10250 --healthz-port 10248 \
  >>"$DATA/nodes.log" 2>&1 &
pids+=($!)

cat <<INFO
store:      ETCDCTL_API=3 etcdctl --endpoints=$etcd_servers ${store_client[*]} endpoint status -w table
apiservers: kubectl --kubeconfig $PKI/kubeconfig get ns   (https://127.0.0.1:16443; :26443 is the second)
nodes:      kubectl --kubeconfig $PKI/kubeconfig get nodes; stop one: curl -X POST 127.0.0.1:10248/nodes/capstan-node-0/stop
scheduler:  kubectl --kubeconfig $PKI/kubeconfig -n kube-system get lease kube-scheduler   (the leading API server's)
logs:       $DATA/*.log
INFO
wait
