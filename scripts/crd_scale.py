#!/usr/bin/env python3
"""Custom resources at scale; what a run shows goes in RESULTS.md.

Against a running server's plain-HTTP port (`capstan --insecure-port P`):
the time from creating a CRD to its first 200, N creates of its objects
from several connections, lists of all of them (from the watch cache, and
consistent), a paged walk, a watch replaying the last 4,000 creates, and the delay
of live watch events.

    python3 scripts/crd_scale.py --port 8080 --count 10000
"""

import argparse
import http.client
import json
import statistics
import threading
import time

GROUP = "scale.example.com"
PLURAL = "widgets"
BASE = f"/apis/{GROUP}/v1/namespaces/default/{PLURAL}"


def crd():
    spec = {"type": "object", "properties": {
        "size": {"type": "integer"}, "colour": {"type": "string"}}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": {"plural": PLURAL, "kind": "Widget"},
            "versions": [{"name": "v1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": {"type": "object",
                                                         "properties": {"spec": spec}}}}],
        },
    }


def widget(i):
    return {"apiVersion": f"{GROUP}/v1", "kind": "Widget",
            "metadata": {"name": f"w{i:06d}"}, "spec": {"size": i, "colour": "blue"}}


def request(conn, method, path, body=None):
    conn.request(method, path, body=json.dumps(body) if body is not None else None,
                 headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, response.read()


def timed(fn, runs):
    times = []
    for _ in range(runs):
        began = time.monotonic()
        fn()
        times.append((time.monotonic() - began) * 1000)
    return statistics.median(times)


def create_all(port, count, workers):
    def work(share):
        conn = http.client.HTTPConnection("127.0.0.1", port)
        for i in share:
            status, body = request(conn, "POST", BASE, widget(i))
            assert status == 201, body
    threads = [threading.Thread(target=work, args=(range(w, count, workers),))
               for w in range(workers)]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return count / (time.monotonic() - began)


def list_items(conn, query):
    status, body = request(conn, "GET", f"{BASE}?{query}")
    assert status == 200, body
    return json.loads(body)


def paged_walk(conn, limit):
    token, items = "", 0
    while True:
        page = list_items(conn, f"limit={limit}&continue={token}")
        items += len(page["items"])
        token = page["metadata"].get("continue", "")
        if not token:
            return items


def replay(port, from_rv, count):
    """Seconds a watch from `from_rv` takes to deliver `count` ADDED events."""
    conn = http.client.HTTPConnection("127.0.0.1", port)
    began = time.monotonic()
    conn.request("GET", f"{BASE}?watch=1&resourceVersion={from_rv}")
    response = conn.getresponse()
    assert response.status == 200, response.read()
    seen = 0
    while seen < count:
        line = response.readline()
        assert line, f"watch ended after {seen} events"
        event = json.loads(line)
        assert event["type"] != "ERROR", event["object"].get("message")
        if event["type"] == "ADDED":
            seen += 1
    return time.monotonic() - began


def live_delay(port, samples):
    """Median ms from a create's answer to its watch event."""
    conn = http.client.HTTPConnection("127.0.0.1", port)
    listed = list_items(conn, "limit=1")
    watch = http.client.HTTPConnection("127.0.0.1", port)
    watch.request("GET", f"{BASE}?watch=1&resourceVersion={listed['metadata']['resourceVersion']}")
    stream = watch.getresponse()
    delays = []
    for i in range(samples):
        status, body = request(conn, "POST", BASE, widget(10_000_000 + i))
        answered = time.monotonic()
        assert status == 201, body
        name = json.loads(body)["metadata"]["name"]
        while True:
            event = json.loads(stream.readline())
            if event["object"]["metadata"]["name"] == name:
                delays.append((time.monotonic() - answered) * 1000)
                break
    return statistics.median(delays)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--count", type=int, default=10000)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    conn = http.client.HTTPConnection("127.0.0.1", args.port)

    began = time.monotonic()
    status, body = request(conn, "POST",
                           "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd())
    assert status == 201, body
    while request(conn, "GET", BASE)[0] != 200:
        assert time.monotonic() - began < 60, "not served within a minute"
        time.sleep(0.005)
    print(f"CRD create to first 200: {(time.monotonic() - began) * 1000:.0f} ms")

    rate = create_all(args.port, args.count, args.workers)
    print(f"{args.count} creates from {args.workers} connections: {rate:.0f}/s")
    # The first connection sat idle past the server's keep-alive meanwhile.
    conn = http.client.HTTPConnection("127.0.0.1", args.port)

    cached = timed(lambda: list_items(conn, "resourceVersion=0"), 10)
    consistent = timed(lambda: list_items(conn, ""), 5)
    walked = timed(lambda: paged_walk(conn, 500), 3)
    print(f"list of all {args.count} from the cache, p50: {cached:.0f} ms")
    print(f"consistent list of all {args.count}, p50: {consistent:.0f} ms")
    print(f"paged walk (limit=500) over all {args.count}, p50: {walked:.0f} ms")
    # The watch cache keeps the last 4,096 events (cache/cacher.rs WINDOW);
    # an older resourceVersion is answered 410, as kube's cacher does.
    versions = sorted(int(item["metadata"]["resourceVersion"])
                      for item in list_items(conn, "resourceVersion=0")["items"])
    replayed = min(4000, len(versions) - 1)
    seconds = replay(args.port, versions[-replayed - 1], replayed)
    print(f"watch from {replayed} creates back delivered them in {seconds * 1000:.0f} ms")
    print(f"live watch event after its create's answer, p50 of 100: {live_delay(args.port, 100):.1f} ms")


if __name__ == "__main__":
    main()
