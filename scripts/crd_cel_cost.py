#!/usr/bin/env python3
"""What CEL rules cost a custom resource create.

Against a running server's plain-HTTP port (`capstan --insecure-port P`),
creates two CRDs with the same schema, one of them with three
x-kubernetes-validations rules (a comparison, a messageExpression rule
and a transition rule), then POSTs N objects of each, alternating in
batches of 50 so that load from elsewhere falls on both alike, over one
keep-alive connection. Prints each kind's mean and median create time.

    python3 scripts/crd_cel_cost.py --port 8080 --count 1000
"""

import argparse
import http.client
import json
import statistics
import time


def crd(plural, kind, rules):
    spec = {
        "type": "object",
        "properties": {
            "minReplicas": {"type": "integer"},
            "maxReplicas": {"type": "integer"},
            "color": {"type": "string"},
            "id": {"type": "string"},
        },
    }
    if rules:
        spec["x-kubernetes-validations"] = [
            {"rule": "self.minReplicas <= self.maxReplicas", "message": "min above max"},
            {"rule": "self.color != 'black'", "messageExpression": "'no ' + self.color"},
        ]
        spec["properties"]["id"]["x-kubernetes-validations"] = [
            {"rule": "self == oldSelf", "message": "immutable"}
        ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.bench.example.com"},
        "spec": {
            "group": "bench.example.com",
            "scope": "Namespaced",
            "names": {"plural": plural, "kind": kind},
            "versions": [{"name": "v1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": {"type": "object",
                                                         "properties": {"spec": spec}}}}],
        },
    }


def request(conn, method, path, body=None):
    conn.request(method, path, body=json.dumps(body) if body else None,
                 headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, response.read()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--count", type=int, default=1000)
    args = parser.parse_args()
    conn = http.client.HTTPConnection("127.0.0.1", args.port)
    kinds = {"plain": ("plaingizmos", "PlainGizmo", False),
             "rules": ("rulegizmos", "RuleGizmo", True)}
    for plural, kind, rules in kinds.values():
        status, body = request(conn, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                               crd(plural, kind, rules))
        assert status in (201, 409), body
    deadline = time.monotonic() + 60
    for plural, _, _ in kinds.values():
        while request(conn, "GET", f"/apis/bench.example.com/v1/namespaces/default/{plural}")[0] != 200:
            assert time.monotonic() < deadline, f"{plural} not served"
            time.sleep(0.1)
    times = {name: [] for name in kinds}
    for start in range(0, args.count, 50):
        for name, (plural, kind, _) in kinds.items():
            for i in range(start, min(start + 50, args.count)):
                obj = {"apiVersion": "bench.example.com/v1", "kind": kind,
                       "metadata": {"name": f"g{i}"},
                       "spec": {"minReplicas": 1, "maxReplicas": 3, "color": "red", "id": f"id{i}"}}
                began = time.perf_counter()
                status, body = request(conn, "POST",
                                       f"/apis/bench.example.com/v1/namespaces/default/{plural}", obj)
                times[name].append(time.perf_counter() - began)
                assert status == 201, body
    for name, samples in times.items():
        print(f"{name}: {len(samples)} creates, mean {statistics.mean(samples) * 1000:.2f} ms, "
              f"median {statistics.median(samples) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
