#!/bin/bash
# A member down while KEYS keys are written catches up by a raft snapshot:
# time from its restart to its revision matching, and RSS of both sides.
# usage: scripts/snapshot-catchup.sh target/release/capstan-store [keys, 100000]
set -u
BIN=$1; KEYS=${2:-100000}
W=/tmp/snapm/catch; rm -rf $W; mkdir -p $W
export ETCDCTL_API=3
VAL=$(head -c 256 /dev/zero | tr '\0' 'v')
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
for i in 1 2 3; do C[$i]=$(freeport); P[$i]=$(freeport); done
IC="m1=http://127.0.0.1:${P[1]},m2=http://127.0.0.1:${P[2]},m3=http://127.0.0.1:${P[3]}"
start() { $BIN --name m$1 --data-dir $W/m$1 --listen-client-urls http://127.0.0.1:${C[$1]} --advertise-client-urls http://127.0.0.1:${C[$1]} \
  --listen-peer-urls http://127.0.0.1:${P[$1]} --initial-advertise-peer-urls http://127.0.0.1:${P[$1]} --initial-cluster $IC \
  --snapshot-count 100 >> $W/m$1.log 2>&1 & echo $!; }
healthy() { for i in $(seq 1 3000); do curl -s http://127.0.0.1:$1/health | grep -q true && return 0; sleep 0.02; done; return 1; }
rev() { etcdctl --endpoints 127.0.0.1:$1 get x --consistency=s -w json 2>/dev/null | grep -o '"revision":[0-9]*' | head -1 | cut -d: -f2; }
for i in 1 2 3; do PID[$i]=$(start $i); done
for i in 1 2 3; do healthy ${C[$i]} || { echo "m$i not healthy"; exit 1; }; done
kill -9 ${PID[3]}; wait ${PID[3]} 2>/dev/null
EP="127.0.0.1:${C[1]},127.0.0.1:${C[2]}"
for ((b=0; b<KEYS; b+=100)); do
  # The first may meet an election (the killed member may have led): retried.
  until { echo; for ((i=b; i<b+100 && i<KEYS; i++)); do printf 'put key%07d %s\n' $i $VAL; done; echo; echo; } \
    | etcdctl --endpoints $EP txn > /dev/null 2>&1; do sleep 0.2; done
done
target=$(rev ${C[1]}); echo "written: revision $target"
leader_rss=$(awk '/VmRSS/{print $2}' /proc/${PID[1]}/status)
t0=$(date +%s.%N); PID[3]=$(start 3)
max3=0; max1=0
while true; do
  r3=$(awk '/VmRSS/{print $2}' /proc/${PID[3]}/status 2>/dev/null); [ "${r3:-0}" -gt $max3 ] && max3=$r3
  r1=$(awk '/VmRSS/{print $2}' /proc/${PID[1]}/status); [ "${r1:-0}" -gt $max1 ] && max1=$r1
  [ "$(rev ${C[3]})" = "$target" ] && break
  sleep 0.05
done
t1=$(date +%s.%N)
hwm3=$(awk "/VmHWM/{print \$2}" /proc/${PID[3]}/status); echo "VmHWM of the restarted member: $hwm3 kB"; echo "caught up in $(echo "$t1 - $t0" | bc) s; restarted member peak RSS $max3 kB; member 1 RSS $leader_rss kB before, peak $max1 kB during"
grep -h "installing a snapshot file" $W/m3.log | tail -1
curl -s http://127.0.0.1:${C[3]}/metrics | grep -E "snapshots_applied|snapshot_receive_success"
for i in 1 2 3; do kill ${PID[$i]} 2>/dev/null; done
