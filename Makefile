# Capstan: the two commands a new user needs are `make run` and `make test`.

CARGO ?= cargo
DATA_DIR ?= data
CLIENT_URL ?= http://127.0.0.1:2379

.PHONY: all deps build run cluster test unit integration test-store-on-etcd fuzz bench bench-short density chaos test-fresh compose-test fmt clippy clean

all: build

deps:
	@./scripts/install-deps.sh

build: deps
	$(CARGO) build --bins

## The embedded default: one store member and one API server in one
## process, data under ./data, kubeconfig at ./data/kubeconfig.
run: deps
	$(CARGO) build --release --bins
	./target/release/capstan --data-dir $(DATA_DIR)

## A replicated control plane on loopback: 3 store members, 2 apiservers.
cluster: deps
	$(CARGO) build --release --bins
	./scripts/cluster.sh

## Every test: unit tests next to the code, process-level tests in tests/
## (among them a short seeded fuzz run), the store suite once more against
## a real etcd, and a short benchmark run so the load generator keeps working.
test: deps
	$(CARGO) build --bins
	$(CARGO) test --workspace
	$(MAKE) test-store-on-etcd
	$(MAKE) bench-short

unit: deps
	$(CARGO) test --workspace --lib --bins

integration: deps
	$(CARGO) build --bins
	$(CARGO) test -p capstan-tests
	$(MAKE) test-store-on-etcd

## The process tests of the store, run against the reference etcd instead of
## capstan-store: the proof that they encode etcd's behaviour, not ours.
STORE_SUITE = --test etcdctl --test etcdctl_watch_lease --test etcd_client --test etcd_client_watch \
	--test etcd_client_lease --test backup --test bad_input --test durability --test history \
	--test watch_catch_up --test store_quota --test store_auth
test-store-on-etcd: deps
	CAPSTAN_TEST_SERVER=etcd $(CARGO) test -p capstan-tests $(STORE_SUITE)

## A long fuzz run of the REST and gRPC decoders, on a new seed each time
## (printed; rerun one with `make fuzz FUZZ_SEED=<seed>`).
FUZZ_SEED ?= $(shell date +%s)
fuzz: deps
	$(CARGO) build --bins
	CAPSTAN_FUZZ_SEED=$(FUZZ_SEED) CAPSTAN_FUZZ_REQUESTS=20000 CAPSTAN_FUZZ_CONNECTIONS=3000 \
	CAPSTAN_TEST_BUDGET_SECS=7200 $(CARGO) test -p capstan-tests --test fuzz --test fuzz_grpc -- --nocapture

## Throughput and latency of capstan-store next to a real etcd, in one run:
## single members at 1, 64 and 256 clients with every other workload, then
## the store workloads on 3-member clusters of each; then puts at 64 and
## 512 clients over 64 connections (one serving thread cannot hide behind
## 16), on 1 and 3 members, each row with each server's busiest thread (a
## WARNING names any above 80% of a core), and the same puts with both
## servers pinned to 1, 2, 4, ... of this machine's cores (BENCH_CORES),
## a table and scaling.svg by core count. Then capstan-scheduler in kube's
## scheduler_perf shape (1,000 nodes, 10,000 pods; SchedulingBasic,
## TopologySpreading, InterPodAffinity) and 5,000 simulated nodes holding
## their Leases, each against a fresh capstan. Each run's results go
## to target/bench: run.json and run-3.json (the last runs; the ones before
## are kept as previous*.json and compared with) and store.svg and
## store-3.svg, pictures. What a run shows goes in RESULTS.md (a row at the
## top of its area's table: date, commit, command).
bench: deps
	$(CARGO) build --release --bins
	mkdir -p target/bench
	if [ -f target/bench/run.json ]; then mv target/bench/run.json target/bench/previous.json; fi
	if [ -f target/bench/run-3.json ]; then mv target/bench/run-3.json target/bench/previous-3.json; fi
	./target/release/capstan-bench --duration 10s --clients 1,64,256 --json target/bench/run.json \
		--plot target/bench/store.svg --compare target/bench/previous.json --scale-keys 1000000
	./target/release/capstan-bench --duration 10s --clients 1,64,256 --members 3 --workload store \
		--watchers 0 --scale-keys 0 --json target/bench/run-3.json \
		--plot target/bench/store-3.svg --compare target/bench/previous-3.json
	./target/release/capstan-bench --duration 10s --clients 64,512 --max-conns 64 --workload store \
		--store-workloads put --watchers 0 --scale-keys 0 --json target/bench/put-64conns.json
	./target/release/capstan-bench --duration 10s --clients 64,512 --max-conns 64 --members 3 --workload store \
		--store-workloads put --watchers 0 --scale-keys 0 --json target/bench/put-64conns-3.json
	./target/release/capstan-bench --duration 10s --clients 64,512 --max-conns 64 --cores $(BENCH_CORES) \
		--workload store --store-workloads put --watchers 0 --scale-keys 0 \
		--json target/bench/scaling.json --scaling-plot target/bench/scaling.svg
	./target/release/capstan-bench --workload scheduler --scheduler-nodes 1000 --scheduler-pods 10000
	./target/release/capstan-bench --workload heartbeats --heartbeat-nodes 5000 --heartbeat-window 30s
	$(MAKE) density

## The density run, twice: on `capstan`, then on make cluster's shape with
## the controllers' API server killed mid-ramp. 1,000 simulated nodes, 300
## Deployments of 100 replicas (30,000 pods), 5 minutes of churn at 20
## pods/s, then everything deleted; per phase pods/s, pod startup latency,
## the SLO probe's latencies, RSS and CPU per process, the store's size and
## the queues, against the targets of a 2-core machine (reported, not
## asserted). JSON and a picture per run under target/bench. Then 10,000
## pods on 100 nodes with a noisy tenant listing every pod from 32 loops
## during a minute of churn: what it got, and the SLO probe, the replaced
## pods and the nodes' heartbeats meanwhile (fairness.json).
density: deps
	$(CARGO) build --release --bins
	mkdir -p target/bench
	./target/release/capstan-bench --workload density --density-targets \
		--json target/bench/density.json --plot target/bench/density.svg
	./target/release/capstan-bench --workload density --density-targets --density-cluster \
		--json target/bench/density-cluster.json --plot target/bench/density-cluster.svg
	./target/release/capstan-bench --workload density --density-nodes 100 --density-deployments 100 \
		--density-replicas 100 --density-churn 60s --density-noisy-tenant 32 \
		--json target/bench/fairness.json --plot target/bench/fairness.svg

## 1, 2, 4, ... up to the cores this shell may use, and that count itself.
BENCH_CORES ?= $(shell n=$$(nproc); c=1; l=1; while [ $$((c * 2)) -le $$n ]; do c=$$((c * 2)); l="$$l,$$c"; done; \
	[ $$c -eq $$n ] || l="$$l,$$n"; echo $$l)

bench-short: deps
	$(CARGO) build --bins
	mkdir -p target/bench
	./target/debug/capstan-bench --duration 1s --clients 1,8 --api-list-size 100 --api-cache-objects 200 --quiet \
		--json target/bench/short.json --plot target/bench/short.svg --scale-keys 10000
	./target/debug/capstan-bench --duration 1s --clients 1 --members 3 --workload store --watchers 0 \
		--scale-keys 0 --quiet --json target/bench/short-3.json --plot target/bench/short-3.svg
	./target/debug/capstan-bench --duration 1s --clients 8 --max-conns 4 --cores 1 --workload store \
		--store-workloads put --watchers 0 --scale-keys 0 --quiet --json target/bench/short-cores.json
	./target/debug/capstan-bench --workload scheduler --scheduler-nodes 30 --scheduler-pods 200 --quiet
	./target/debug/capstan-bench --workload heartbeats --heartbeat-nodes 50 --heartbeat-window 11s --quiet
	./target/debug/capstan-bench --workload density --density-nodes 100 --density-deployments 10 \
		--density-replicas 100 --density-churn 10s --density-noisy-tenant 4 --quiet \
		--json target/bench/density-short.json --plot target/bench/density-short.svg

## Long fault-injection runs: the fault suites (kill -9, SIGSTOP, partitions,
## one-way partitions, membership changes; histories checked for
## linearizability and the watch guarantees) for 5 minutes each, about 190
## faults, histories and reports kept under target/chaos; then repeated kill -9
## of a single member and of a cluster's leader under writes.
chaos: deps
	$(CARGO) build --bins
	CAPSTAN_FAULT_SECONDS=300 CAPSTAN_FAULT_DIR=target/chaos CAPSTAN_TEST_BUDGET_SECS=1800 $(CARGO) test -p capstan-tests --test fault_etcd --test fault_apiserver -- --nocapture --test-threads 1
	CAPSTAN_CHAOS_ROUNDS=10 CAPSTAN_TEST_BUDGET_SECS=1800 $(CARGO) test -p capstan-tests --test durability --test cluster --test control_plane_chaos -- --nocapture --test-threads 1

## The README's two commands in a fresh container (a new machine of this
## kind: fresh clone, no cargo registry, no protoc, no etcd). Needs a Docker
## engine (started if installable); skips with a message otherwise.
test-fresh:
	./scripts/test-fresh.sh all

## compose.yaml for real: kills, restarts and scaling under a kubectl writer
## and a REST watch through the load balancer. Needs a Docker engine.
compose-test: deps
	./scripts/compose-test.sh

fmt:
	$(CARGO) fmt --all

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean
	rm -rf $(DATA_DIR)
