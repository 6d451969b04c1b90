#!/bin/bash
# Rough snapshot save/restore numbers, capstan-store next to etcd 3.4.
# usage: scripts/snapshot-compare.sh target/release/capstan-store [keys, 100000]
# Starts each server on free loopback ports under /tmp/snapm/run, loads the
# keys with etcdctl txn, saves, then restores each file into both.
set -u
BIN=$1; KEYS=${2:-100000}
W=${SNAPM_DIR:-/tmp/snapm/run}; rm -rf $W; mkdir -p $W
export ETCDCTL_API=3
VAL=$(head -c 256 /dev/zero | tr '\0' 'v')
start() { # name port peer [extra...]
  local name=$1 port=$2 peer=$3; shift 3
  if [ $name = etcd ]; then
    etcd --data-dir $W/$name --listen-client-urls http://127.0.0.1:$port --advertise-client-urls http://127.0.0.1:$port \
      --listen-peer-urls http://127.0.0.1:$peer --initial-advertise-peer-urls http://127.0.0.1:$peer \
      --initial-cluster default=http://127.0.0.1:$peer "$@" > $W/$name.log 2>&1 &
  else
    $BIN --data-dir $W/$name --listen-client-urls http://127.0.0.1:$port --listen-peer-urls http://127.0.0.1:$peer "$@" > $W/$name.log 2>&1 &
  fi
  echo $!
}
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
healthy() { for i in $(seq 1 6000); do curl -s http://127.0.0.1:$1/health | grep -q true && return 0; sleep 0.01; done; return 1; }
load() { # port
  for ((b=0; b<KEYS; b+=100)); do
    { echo; for ((i=b; i<b+100 && i<KEYS; i++)); do printf 'put key%07d %s\n' $i $VAL; done; echo; echo; } \
      | etcdctl --endpoints 127.0.0.1:$1 txn > /dev/null || echo "txn failed at $b"
  done
}
rss_max() { # pid file-to-stop
  local max=0; while [ ! -e $2 ]; do r=$(awk '/VmRSS/{print $2}' /proc/$1/status); [ "${r:-0}" -gt $max ] && max=$r; sleep 0.02; done; echo $max
}
save() { # name pid port
  local before=$(awk '/VmRSS/{print $2}' /proc/$2/status)
  rm -f $W/stop; (rss_max $2 $W/stop > $W/$1.rssmax) &
  local t0=$(date +%s.%N)
  etcdctl --endpoints 127.0.0.1:$3 snapshot save $W/$1.db > /dev/null
  local t1=$(date +%s.%N); touch $W/stop; wait
  echo "$1 save: $(echo "$t1 - $t0" | bc) s, file $(stat -c %s $W/$1.db) bytes, RSS before ${before} kB, peak during $(cat $W/$1.rssmax) kB"
  etcdctl snapshot status $W/$1.db -w json
}
for name in capstan etcd; do
  port=$(freeport); peer=$(freeport)
  pid=$(start $name $port $peer); healthy $port || { echo "$name not healthy"; cat $W/$name.log | tail; exit 1; }
  t0=$(date +%s.%N); load $port; t1=$(date +%s.%N); echo "$name load $KEYS keys: $(echo "$t1 - $t0" | bc) s"
  save $name $pid $port
  kill $pid; wait $pid 2>/dev/null
done
# restores: each file into capstan-store, and each into etcd (etcdctl snapshot restore + start)
for file in capstan etcd; do
  cp=$(freeport); pp=$(freeport)
  t0=$(date +%s.%N); pid=$(start capstan-from-$file $cp $pp --restore-snapshot $W/$file.db); healthy $cp; t1=$(date +%s.%N)
  n=$(etcdctl --endpoints 127.0.0.1:$cp get key --prefix --keys-only | grep -c "^key")
  echo "capstan-store --restore-snapshot $file.db to healthy: $(echo "$t1 - $t0" | bc) s ($n), peak RSS $(awk '/VmHWM/{print $2}' /proc/$pid/status) kB"
  kill $pid; wait $pid 2>/dev/null
  ep=$(freeport); epp=$(freeport)
  t0=$(date +%s.%N)
  etcdctl snapshot restore $W/$file.db --data-dir $W/etcd-from-$file --name default \
    --initial-cluster default=http://127.0.0.1:$epp --initial-advertise-peer-urls http://127.0.0.1:$epp > /dev/null 2>&1 || echo "etcdctl restore of $file failed"

  pid=$(etcd --data-dir $W/etcd-from-$file --listen-client-urls http://127.0.0.1:$ep --advertise-client-urls http://127.0.0.1:$ep \
      --listen-peer-urls http://127.0.0.1:$epp --initial-advertise-peer-urls http://127.0.0.1:$epp \
      --initial-cluster default=http://127.0.0.1:$epp > $W/etcd-from-$file.log 2>&1 & echo $!)
  healthy $ep; t1=$(date +%s.%N)
  n=$(etcdctl --endpoints 127.0.0.1:$ep get key --prefix --keys-only | grep -c "^key")
  echo "etcdctl snapshot restore $file.db + etcd to healthy: $(echo "$t1 - $t0" | bc) s ($n)"
  kill $pid; wait $pid 2>/dev/null
done
