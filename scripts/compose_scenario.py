#!/usr/bin/env python3
"""The compose scenario behind `make compose-test` (run by scripts/compose-test.sh).

Brings compose.yaml up (3 store members, 2 API servers, HAProxy) under its own
project name, then, with a kubectl writer and a REST watcher running through
the load balancer the whole time:

  1. kills and restarts a follower store member, the store leader, and each
     API server container in turn (`docker-compose kill` / `start`);
  2. scales the API servers to 3 and back to 2;
  3. checks that every acknowledged create is listed with the resourceVersion
     it was acknowledged with, and that the watch (which resumes at its last
     resourceVersion on whichever API server the balancer picks) saw each
     acknowledged object exactly once, in resourceVersion order;
  4. brings everything down (keeping the named volumes) and up again, and
     checks that every acknowledged object is still there.

Prints what it measured: time to first healthy, and per fault the longest
time without an acknowledged write. Exits non-zero on any violation.
"""

import http.client
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time

PROJECT = os.environ.get("CAPSTAN_COMPOSE_PROJECT", "capstan-compose-test")
COMPOSE = ["docker-compose", "-p", PROJECT, "-f", "compose.yaml"]
LB = ("127.0.0.1", 6443)
# The `pki` volume's contents, copied out once the certificates service ran.
PKI = os.path.join(tempfile.mkdtemp(prefix="capstan-compose-pki-"), "pki")
NAMESPACE = "compose-test"
STORE_PORTS = {"store1": 12379, "store2": 22379, "store3": 32379}
HEALTHY_DEADLINE = 180.0


class ScenarioError(Exception):
    pass


def log(message):
    print(f"compose-test: {message}", flush=True)


def run(args, check=True, timeout=120):
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise ScenarioError(f"{' '.join(args)} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done


def compose(*args, timeout=300):
    return run(COMPOSE + list(args), timeout=timeout)


def kubectl(*args, timeout=15):
    return run(["kubectl", "--kubeconfig", os.path.join(PKI, "kubeconfig"),
                f"--request-timeout={timeout - 5}s", *args],
               check=False, timeout=timeout)


def copy_pki():
    """Copies the certificates the one-shot service made out of the volume,
    so kubectl, etcdctl and the watcher here can use them."""
    made = compose("ps", "-q", "certificates").stdout.split()
    if not made:
        raise ScenarioError("the certificates service did not run")
    run(["docker", "wait", made[0]], timeout=120)
    run(["docker", "cp", f"{made[0]}:/pki", PKI])
    log(f"certificates and the admin kubeconfig copied to {PKI}")


def admin_tls():
    """A TLS context that trusts the API servers' CA and presents the admin
    client certificate, as the kubeconfig does."""
    context = ssl.create_default_context(cafile=os.path.join(PKI, "server-ca.crt"))
    context.load_cert_chain(os.path.join(PKI, "admin.crt"), os.path.join(PKI, "admin.key"))
    return context


def containers(service=None):
    args = ["ps", "-q"] + ([service] if service else [])
    return [c for c in compose(*args).stdout.split() if c]


def health(container):
    out = run(["docker", "inspect", "-f", "{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}",
               container], check=False)
    return out.stdout.strip()


def wait_healthy(expected, what):
    """Waits until `expected` containers are running and healthy and the API answers."""
    start = time.monotonic()
    while time.monotonic() - start < HEALTHY_DEADLINE:
        ids = containers()
        states = [health(c) for c in ids]
        healthy = sum(1 for s in states if s == "running healthy")
        if len(ids) >= expected and healthy >= expected and kubectl("get", "--raw", "/readyz").returncode == 0:
            return time.monotonic() - start
        time.sleep(0.5)
    raise ScenarioError(f"{what}: not healthy within {HEALTHY_DEADLINE:.0f}s: {dict(zip(containers(), states))}")


def store_leader():
    endpoints = ",".join(f"127.0.0.1:{p}" for p in STORE_PORTS.values())
    tls = [f"--cacert={PKI}/etcd/ca.crt", f"--cert={PKI}/etcd/client.crt", f"--key={PKI}/etcd/client.key"]
    out = run(["etcdctl", f"--endpoints={endpoints}", *tls, "endpoint", "status", "-w", "json"],
              check=False, timeout=30)
    for status in json.loads(out.stdout or "[]"):
        if status["Status"]["header"]["member_id"] == status["Status"]["leader"]:
            port = int(status["Endpoint"].rsplit(":", 1)[1])
            return next(name for name, p in STORE_PORTS.items() if p == port)
    raise ScenarioError(f"no store leader found: {out.stdout} {out.stderr}")


class Writer(threading.Thread):
    """Creates ConfigMaps through the balancer with kubectl, one at a time, and
    records each acknowledgement (name, resourceVersion, time)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.acked = {}
        self.ack_times = []
        self.failures = []
        self.lock = threading.Lock()

    def run(self):
        n = 0
        while not self.stop.is_set():
            n += 1
            name = f"w-{n}"
            out = kubectl("-n", NAMESPACE, "create", "configmap", name, f"--from-literal=n={n}", "-o", "json")
            now = time.monotonic()
            with self.lock:
                if out.returncode == 0:
                    self.acked[name] = json.loads(out.stdout)["metadata"]["resourceVersion"]
                    self.ack_times.append(now)
                else:
                    self.failures.append((now, name, out.stderr.strip()[:200]))
                    time.sleep(0.2)

    def longest_gap(self, since, until):
        with self.lock:
            times = [t for t in self.ack_times if since <= t <= until]
        points = [since] + times + ([until] if not times or times[-1] < until else [])
        return max(b - a for a, b in zip(points, points[1:]))


class Watcher(threading.Thread):
    """Watches the ConfigMaps through the balancer; when the stream ends (its API
    server was killed, or the balancer moved it) it resumes at the last
    resourceVersion it saw, on whichever API server answers."""

    def __init__(self, resource_version):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.rv = resource_version
        self.events = []
        self.resumes = 0
        self.errors = []
        self.tls = admin_tls()

    def run(self):
        while not self.stop.is_set():
            try:
                self.stream_once()
            except (OSError, http.client.HTTPException, ValueError) as err:
                self.errors.append(str(err)[:200])
            self.resumes += 1
            time.sleep(0.3)

    def stream_once(self):
        conn = http.client.HTTPSConnection(*LB, timeout=10, context=self.tls)
        path = (f"/api/v1/namespaces/{NAMESPACE}/configmaps?watch=1&allowWatchBookmarks=true"
                f"&resourceVersion={self.rv}&timeoutSeconds=60")
        conn.request("GET", path)
        response = conn.getresponse()
        if response.status != 200:
            raise ValueError(f"watch answered {response.status}: {response.read()[:200]!r}")
        while not self.stop.is_set():
            line = response.readline()
            if not line:
                return
            event = json.loads(line)
            if event["type"] == "ERROR":
                raise ValueError(f"watch error event: {event['object']}")
            self.rv = event["object"]["metadata"]["resourceVersion"]
            if event["type"] != "BOOKMARK":
                self.events.append((event["type"], event["object"]["metadata"]["name"], int(self.rv)))


def fault(writer, name, kill, restart, expected):
    """Applies one fault, restarts what it killed, and measures the longest
    stretch without an acknowledged write around it."""
    log(f"fault: {name}")
    start = time.monotonic()
    kill()
    time.sleep(3)
    restart()
    wait_healthy(expected, name)
    time.sleep(2)
    gap = writer.longest_gap(start - 0.5, time.monotonic())
    log(f"  {name}: longest time without an acknowledged write {gap:.2f}s")
    return name, gap


def check_acknowledged(acked, what):
    out = kubectl("-n", NAMESPACE, "get", "configmaps", "-o", "json", timeout=60)
    if out.returncode != 0:
        raise ScenarioError(f"{what}: list failed: {out.stderr}")
    listed = {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in json.loads(out.stdout)["items"]}
    missing = [n for n in acked if n not in listed]
    changed = [n for n, rv in acked.items() if n in listed and listed[n] != rv]
    if missing or changed:
        raise ScenarioError(f"{what}: acknowledged creates missing {missing[:10]} or changed {changed[:10]}")
    log(f"{what}: all {len(acked)} acknowledged creates listed with their resourceVersions")


def check_watch(watcher, acked):
    added = [(name, rv) for kind, name, rv in watcher.events if kind == "ADDED"]
    rvs = [rv for _, _, rv in watcher.events]
    if rvs != sorted(rvs) or len(set(rvs)) != len(rvs):
        raise ScenarioError("watch: events out of resourceVersion order or repeated")
    seen = {}
    for name, rv in added:
        seen[name] = seen.get(name, 0) + 1
    twice = [n for n, c in seen.items() if c > 1]
    unseen = [n for n in acked if n not in seen]
    wrong_rv = [n for n, rv in added if n in acked and str(rv) != acked[n]]
    if twice or unseen or wrong_rv:
        raise ScenarioError(f"watch: duplicates {twice[:10]}, missed {unseen[:10]}, wrong rv {wrong_rv[:10]}")
    log(f"watch: {len(added)} ADDED events, each acknowledged create exactly once, in order, "
        f"across {watcher.resumes} resumes")


def check_workload():
    """The simulated nodes, under their own identity, register through the
    balancer and run a Deployment's pods."""
    start = time.monotonic()
    ready = 'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{" "}{end}'
    while kubectl("get", "nodes", "-o", ready).stdout.split().count("True") < 3:
        if time.monotonic() - start > HEALTHY_DEADLINE:
            raise ScenarioError(f"3 nodes not Ready within {HEALTHY_DEADLINE:.0f}s")
        time.sleep(1)
    if kubectl("-n", NAMESPACE, "create", "deployment", "web", "--image=nginx:1.25",
               "--replicas=3").returncode != 0:
        raise ScenarioError("could not create the Deployment")
    rolled = kubectl("-n", NAMESPACE, "rollout", "status", "deployment/web", "--timeout=120s", timeout=130)
    if rolled.returncode != 0:
        raise ScenarioError(f"the Deployment did not roll out: {rolled.stderr.strip() or rolled.stdout.strip()}")
    log(f"3 nodes Ready and a Deployment's 3 pods Running {time.monotonic() - start:.1f}s after the namespace")


def scenario():
    started = time.monotonic()
    compose("up", "-d", "--no-build", "--scale", "apiserver=2")
    copy_pki()
    first_healthy = wait_healthy(6, "first start")
    log(f"time to first healthy: {first_healthy:.1f}s (3 store members, 2 API servers, the balancer)")
    if kubectl("create", "namespace", NAMESPACE).returncode != 0:
        raise ScenarioError("could not create the test namespace")
    check_workload()
    listed = json.loads(kubectl("-n", NAMESPACE, "get", "configmaps", "-o", "json").stdout)
    writer, watcher = Writer(), Watcher(listed["metadata"]["resourceVersion"])
    writer.start()
    watcher.start()
    time.sleep(5)
    baseline = writer.longest_gap(time.monotonic() - 4, time.monotonic())
    log(f"longest time between acknowledged writes before any fault: {baseline:.2f}s")

    leader = store_leader()
    follower = next(s for s in STORE_PORTS if s != leader)
    gaps = [fault(writer, f"kill follower store member {follower}",
                  lambda: compose("kill", follower), lambda: compose("start", follower), 6)]
    leader = store_leader()
    gaps.append(fault(writer, f"kill store leader {leader}",
                      lambda: compose("kill", leader), lambda: compose("start", leader), 6))
    for i, api in enumerate(containers("apiserver")):
        gaps.append(fault(writer, f"kill API server {i + 1} ({api[:12]})",
                          lambda: run(["docker", "kill", api]), lambda: run(["docker", "start", api]), 6))

    log("scaling API servers to 3")
    before = set(containers("apiserver"))
    compose("up", "-d", "--no-build", "--scale", "apiserver=3")
    wait_healthy(7, "scale to 3")
    added = [c for c in containers("apiserver") if c not in before]
    if len(added) != 1 or len(before) != 2:
        raise ScenarioError(f"scale to 3 did not add one API server: before {before}, added {added}")
    # Only the new replica left: the balancer must have found it on its own.
    gaps.append(fault(writer, "kill both original API servers (only the scaled-in one serves)",
                      lambda: [run(["docker", "kill", c]) for c in before],
                      lambda: [run(["docker", "start", c]) for c in before], 7))
    compose("up", "-d", "--no-build", "--scale", "apiserver=2")
    wait_healthy(6, "scale back to 2")
    time.sleep(3)

    writer.stop.set()
    writer.join(30)
    time.sleep(2)
    watcher.stop.set()
    watcher.join(70)
    acked = dict(writer.acked)
    if len(acked) < 20:
        raise ScenarioError(f"only {len(acked)} writes were acknowledged: {writer.failures[-5:]}")
    check_acknowledged(acked, "after the faults")
    check_watch(watcher, acked)
    if watcher.resumes < 1:
        raise ScenarioError("the watch never had to resume, although every API server it could use was killed")

    log("down (volumes kept) and up again")
    compose("down")
    compose("up", "-d", "--no-build", "--scale", "apiserver=2")
    wait_healthy(6, "restart from volumes")
    check_acknowledged(acked, "after down and up")

    log("report:")
    log(f"  time to first healthy       {first_healthy:.1f}s")
    log(f"  longest gap between acknowledged writes with no fault {baseline:.2f}s")
    for name, gap in gaps:
        log(f"  {name:<64} longest time without an acknowledged write {gap:.2f}s")
    log(f"  writes acknowledged {len(acked)}, failed {len(writer.failures)} "
        f"(median gap under faults {statistics.median(g for _, g in gaps):.2f}s)")
    for when, name, error in writer.failures:
        log(f"  failed write {name}: {error}")
    log(f"  watch resumes {watcher.resumes}, watch errors {len(watcher.errors)}")
    log(f"  whole scenario {time.monotonic() - started:.0f}s")


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    run(COMPOSE + ["down", "-v", "--remove-orphans"], check=False)
    try:
        scenario()
        print("compose-test: 1 passed, 0 failed")
        return 0
    except (ScenarioError, subprocess.TimeoutExpired) as err:
        print(f"compose-test: FAILED: {err}", file=sys.stderr)
        for service in ("store1", "apiserver", "loadbalancer"):
            print(run(COMPOSE + ["logs", "--tail=20", service], check=False).stdout, file=sys.stderr)
        print("compose-test: 0 passed, 1 failed")
        return 1
    finally:
        run(COMPOSE + ["down", "-v", "--remove-orphans"], check=False)


if __name__ == "__main__":
    sys.exit(main())
