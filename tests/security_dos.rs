//! Denial of service by a small request, tried on the running `capstan`
//! (store and API server in one process, so a request that exhausts one
//! takes both down): a YAML body whose aliases expand past a small multiple
//! of its size, a JSON patch whose `copy` operations double an object
//! again and again, a JSON patch that nests an object past the depth the
//! server can read back, and CEL that runs past kube's cost limits in a
//! ValidatingAdmissionPolicy and in a webhook's `matchConditions`. Each is
//! answered with a 4xx naming the reason, changes nothing, and leaves the
//! server's peak memory (VmHWM, reset before the attack) within a small
//! bound. Also: made-up paths add no request-metric series, and one
//! user holds at most `--max-watches-per-user` watches open (then 429).

use std::collections::BTreeSet;
use std::time::Duration;

use capstan_tests::api_requests::WatchEvents;
use capstan_tests::apiserver::Embedded;
use capstan_tests::http::{Connection, Response};
use capstan_tests::poll::wait_for;
use capstan_tests::store::http_get;
use serde_json::{json, Value};

/// What one attack may add to the server's peak memory. Each attack asks
/// for hundreds of megabytes to gigabytes; refused where it should be, it
/// costs a few.
const GROWTH_LIMIT_KIB: u64 = 96 * 1024;

const WAIT: Duration = Duration::from_secs(60);

/// A field of `/proc/<pid>/status`, in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("the server (pid {pid}) is gone: {e}"));
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    line.split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line:?}"))
}

/// Runs `attack` and returns how far it raised the server's peak
/// resident memory above what it used before, in KiB: the peak (VmHWM)
/// is reset to the current size first (`clear_refs` 5, Linux).
fn peak_growth_kib(server: &Embedded, attack: impl FnOnce() -> Response) -> (Response, u64) {
    let pid = server.pid();
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("reset the peak RSS");
    let before = status_kib(pid, "VmRSS:");
    let response = attack();
    let peak = status_kib(pid, "VmHWM:");
    eprintln!(
        "RSS before {before} KiB, peak after {peak} KiB ({} KiB more)",
        peak.saturating_sub(before)
    );
    (response, peak.saturating_sub(before))
}

fn send(server: &Embedded, method: &str, path: &str, content_type: &str, body: &[u8]) -> Response {
    let headers = [
        ("Accept", "application/json"),
        ("Content-Type", content_type),
        ("Connection", "close"),
    ];
    Connection::connect(server.port)
        .and_then(|mut c| c.send(method, path, &headers, body))
        .unwrap_or_else(|e| panic!("{method} {path}: no answer ({e}): did the server die?"))
}

fn json_request(server: &Embedded, method: &str, path: &str, body: &Value) -> (u16, Value) {
    Connection::connect(server.port)
        .and_then(|mut c| c.json(method, path, Some(body)))
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

/// The answer is a refusal of the client's request: a Status with a 4xx
/// code whose message contains `why`.
fn assert_refused(response: &Response, why: &str) -> Value {
    let text = response.text();
    assert!(
        (400..500).contains(&response.status),
        "want a 4xx naming {why:?}, got {}: {}",
        response.status,
        &text[..text.len().min(2000)]
    );
    let status = response.json().expect("a Status");
    assert_eq!(status["kind"], "Status", "{status}");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(message.contains(why), "want {why:?} in {message:?}");
    status
}

fn assert_alive(server: &Embedded) {
    assert!(
        http_get(server.port, "/readyz").is_some(),
        "the server still serves"
    );
}

/// A "billion laughs" in the shape serde_yaml lets through: it caps how
/// many times aliases are followed (a hundred times the document's
/// events), not what each one copies, so a list of a thousand strings
/// referenced through two levels of thirty aliases, five times, is 4.5
/// million strings (some 300 MB as JSON values) from a 20 KB body.
fn yaml_alias_bomb(head: &str) -> String {
    let strings = vec!["\"0123456789abcdef\""; 1000].join(", ");
    let thirty = |name: &str| vec![format!("*{name}"); 30].join(", ");
    format!(
        "{head}\nlaughs:\n  a: &a [{strings}]\n  b: &b [{}]\n  c: &c [{}]\n  d: [*c, *c, *c, *c, *c]\n",
        thirty("a"),
        thirty("b")
    )
}

/// Any authenticated user may ask whether it may do something: a
/// SelfSubjectAccessReview is the cheapest body to reach the decoder with.
#[test]
fn a_yaml_alias_bomb_is_refused_without_expanding_it() {
    let server = Embedded::start();
    let review = "apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\n\
                  spec: {resourceAttributes: {verb: get, resource: pods}}";
    let body = yaml_alias_bomb(review);
    eprintln!("the body is {} bytes", body.len());
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let (response, growth) = peak_growth_kib(&server, || {
        send(&server, "POST", path, "application/yaml", body.as_bytes())
    });
    let status = assert_refused(&response, "aliases");
    assert_eq!(status["code"], 400, "{status}");
    assert!(growth < GROWTH_LIMIT_KIB, "the peak grew {growth} KiB");
    assert_alive(&server);

    // The same body as a server-side apply patch (decoded apart from the
    // other bodies): refused the same way, and nothing created.
    let configmap = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: laughs}";
    let body = yaml_alias_bomb(configmap);
    let path = "/api/v1/namespaces/default/configmaps/laughs?fieldManager=attacker";
    let (response, growth) = peak_growth_kib(&server, || {
        send(
            &server,
            "PATCH",
            path,
            "application/apply-patch+yaml",
            body.as_bytes(),
        )
    });
    assert_refused(&response, "aliases");
    assert!(growth < GROWTH_LIMIT_KIB, "the peak grew {growth} KiB");
    let (code, _) = json_request(&server, "GET", path, &Value::Null);
    assert_eq!(code, 404, "the apply created nothing");
    assert_alive(&server);
}

/// A ConfigMap of 2 KB, and a patch of 1 KB whose sixteen `copy`
/// operations each append a list to itself: 128 MB of strings if applied
/// (kube-apiserver stops a patch whose copies add up past 3 MB).
#[test]
fn a_json_patch_copy_chain_is_refused_before_it_grows() {
    let server = Embedded::start();
    let collection = "/api/v1/namespaces/default/configmaps";
    let victim = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "victim"}, "data": {"seed": "x".repeat(2048)}});
    let (code, created) = json_request(&server, "POST", collection, &victim);
    assert_eq!(code, 201, "{created}");
    let mut ops = vec![json!({"op": "add", "path": "/laughs", "value": ["x".repeat(2048)]})];
    ops.extend((0..16).map(|_| json!({"op": "copy", "from": "/laughs", "path": "/laughs/-"})));
    let patch = Value::from(ops).to_string();
    eprintln!("the patch is {} bytes", patch.len());
    let path = format!("{collection}/victim");
    let (response, growth) = peak_growth_kib(&server, || {
        send(
            &server,
            "PATCH",
            &path,
            "application/json-patch+json",
            patch.as_bytes(),
        )
    });
    assert_refused(&response, "accumulated size increase of copy");
    assert!(growth < GROWTH_LIMIT_KIB, "the peak grew {growth} KiB");
    let (code, now) = json_request(&server, "GET", &path, &Value::Null);
    assert_eq!(code, 200);
    assert_eq!(
        now["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"],
        "the refused patch changed nothing"
    );
    assert_alive(&server);
}

/// `n` objects nested in one another under `name`, a string at the bottom.
fn chain(name: &str, depth: usize) -> Value {
    (0..depth).fold(json!("bottom"), |inner, _| json!({ name: inner }))
}

/// Moves two 100-deep chains into each other's bottom, back and forth: each
/// pair of operations nests the object 100 levels deeper and copies
/// nothing. A thousand pairs (900 KB) make an object 100,000 deep, which
/// code that walks a value recursively (decoding it to a type, encoding
/// it, dropping it) cannot walk without overflowing its stack.
#[test]
fn a_json_patch_nesting_past_the_depth_limit_is_refused() {
    let server = Embedded::start();
    let collection = "/api/v1/namespaces/default/configmaps";
    let victim = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "deep"}});
    let (code, created) = json_request(&server, "POST", collection, &victim);
    assert_eq!(code, 201, "{created}");
    let bottom = |top: &str| format!("/{top}{}", "/n".repeat(99));
    let mut ops = vec![json!({"op": "add", "path": "/a", "value": chain("n", 100)})];
    for i in 0..1000 {
        let (moved, holder) = if i % 2 == 0 { ("a", "b") } else { ("b", "a") };
        ops.push(json!({"op": "add", "path": format!("/{holder}"), "value": chain("n", 100)}));
        ops.push(json!({"op": "move", "from": format!("/{moved}"),
            "path": format!("{}/{moved}", bottom(holder))}));
    }
    let patch = Value::from(ops).to_string();
    eprintln!("the patch is {} bytes", patch.len());
    let path = format!("{collection}/deep");
    let response = send(
        &server,
        "PATCH",
        &path,
        "application/json-patch+json",
        patch.as_bytes(),
    );
    assert_refused(&response, "nested");
    let (code, now) = json_request(&server, "GET", &path, &Value::Null);
    assert_eq!(code, 200);
    assert_eq!(
        now["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    assert_alive(&server);
}

fn apply(server: &Embedded, yaml: &str) {
    let out = server.kubectl.run_with_input(&["apply", "-f", "-"], yaml);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A server-side dry run of a labelled ConfigMap, until admission refuses
/// it (policies and webhook configurations reach admission through the
/// watch caches, a moment after they are written).
fn refused_dry_run(server: &Embedded, label: &str, data: &Value) -> Response {
    let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "probe", "labels": {"attack": label}}, "data": data});
    let body = configmap.to_string();
    let path = "/api/v1/namespaces/default/configmaps?dryRun=All";
    wait_for(WAIT, "admission to refuse the probe", || {
        let response = send(server, "POST", path, "application/json", body.as_bytes());
        (response.status != 201).then_some(response)
    })
}

/// `[0, 1, ..., n-1]` as CEL.
fn cel_range(n: usize) -> String {
    let items: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    format!("[{}]", items.join(", "))
}

/// Three loops over 80 elements nested in one another: 512,000 turns of the
/// innermost body, five times kube's per-call limit of 1,000,000 once each
/// turn is costed, which stops it (this server had no limit for policies).
#[test]
fn a_policy_expression_past_the_cost_limit_is_stopped() {
    let server = Embedded::start();
    let range = cel_range(80);
    let expression = format!("{range}.all(a, {range}.all(b, {range}.all(c, a + b + c >= 0)))");
    let policy = format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: costly}}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}}
  validations:
  - expression: "{expression}"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: costly}}
spec:
  policyName: costly
  validationActions: [Deny]
  matchResources:
    objectSelector: {{matchLabels: {{attack: policy}}}}
"#
    );
    apply(&server, &policy);
    let response = refused_dry_run(&server, "policy", &json!({}));
    let status = assert_refused(
        &response,
        "resulted in error: operation cancelled: actual cost limit exceeded",
    );
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("configmaps \"probe\" is forbidden: ValidatingAdmissionPolicy 'costly' with binding 'costly' denied request: expression '"),
        "{message}"
    );
    assert_alive(&server);
}

/// A match condition that doubles a 4 KB string sixteen times (256 MB) in
/// one expression: kube costs string concatenation by length, so it stops
/// near 10 MB, and the webhook (which does not exist) is never called.
#[test]
fn a_match_condition_past_the_cost_limit_is_stopped_before_it_grows() {
    let server = Embedded::start();
    let doubling = ".map(s, s + s)".repeat(16);
    let expression = format!("[object.data.seed]{doubling}.size() > 0");
    let webhook = format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: costly}}
webhooks:
- name: costly.capstan.test
  clientConfig: {{url: "https://127.0.0.1:1/"}}
  sideEffects: None
  admissionReviewVersions: [v1]
  failurePolicy: Fail
  objectSelector: {{matchLabels: {{attack: webhook}}}}
  rules:
  - {{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}}
  matchConditions:
  - name: doubling
    expression: "{expression}"
"#
    );
    apply(&server, &webhook);
    let data = json!({"seed": "x".repeat(4096)});
    refused_dry_run(&server, "webhook", &data);
    let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "probe", "labels": {"attack": "webhook"}}, "data": data});
    let path = "/api/v1/namespaces/default/configmaps?dryRun=All";
    let (response, growth) = peak_growth_kib(&server, || {
        send(
            &server,
            "POST",
            path,
            "application/json",
            configmap.to_string().as_bytes(),
        )
    });
    assert_refused(
        &response,
        "matchCondition 'doubling' resulted in error: operation cancelled: actual cost limit exceeded",
    );
    assert!(growth < GROWTH_LIMIT_KIB, "the peak grew {growth} KiB");
    assert_alive(&server);
}

/// Every resource the server's discovery lists, and the empty one.
fn served_resources(server: &Embedded) -> BTreeSet<String> {
    let discovery = |path: &str| json_request(server, "GET", path, &Value::Null).1;
    let mut versions = vec!["/api/v1".to_string()];
    for group in discovery("/apis")["groups"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for version in group["versions"].as_array().into_iter().flatten() {
            versions.push(format!(
                "/apis/{}",
                version["groupVersion"].as_str().unwrap_or("")
            ));
        }
    }
    let mut served = BTreeSet::from([String::new()]);
    for path in versions {
        for resource in discovery(&path)["resources"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let name = resource["name"].as_str().unwrap_or("");
            served.insert(name.split('/').next().unwrap_or(name).to_string());
        }
    }
    served
}

/// The request metrics' series, as `/metrics` lists them.
fn request_series(server: &Embedded) -> Vec<String> {
    let metrics = send(server, "GET", "/metrics", "text/plain", &[]);
    assert_eq!(metrics.status, 200, "{}", metrics.text());
    metrics
        .text()
        .lines()
        .filter(|line| line.starts_with("apiserver_request"))
        .map(|line| {
            line.rsplit_once(' ')
                .map_or(line, |(series, _)| series)
                .to_string()
        })
        .collect()
}

#[test]
fn made_up_paths_add_no_metric_series() {
    let server = Embedded::start();
    let before = request_series(&server);
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for i in 0..1000 {
        let word = format!("madeup{:x}", next());
        let path = match i % 4 {
            0 => format!("/api/v1/{word}"),
            1 => format!("/apis/{word}.example.com/v1/namespaces/default/{word}/x"),
            2 => format!("/apis/apps/v1/{word}?watch=1"),
            _ => format!("/{word}/{word}"),
        };
        let method = ["GET", "POST", "DELETE", "PUT"][i % 4];
        let identity = capstan_tests::tls::Identity::Anonymous;
        let answer = Connection::connect_as(server.port, &identity)
            .and_then(|mut c| c.send(method, &path, &[("Connection", "close")], b"{}"))
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        assert!(
            (400..500).contains(&answer.status),
            "{method} {path}: {}",
            answer.status
        );
    }
    let after = request_series(&server);
    let leaked: Vec<&String> = after.iter().filter(|s| s.contains("madeup")).collect();
    assert!(
        leaked.is_empty(),
        "made-up resources label series: {leaked:?}"
    );
    let resources = |series: &[String]| -> BTreeSet<String> {
        series
            .iter()
            .filter_map(|s| s.split("resource=\"").nth(1)?.split('"').next())
            .map(str::to_string)
            .collect()
    };
    let served = served_resources(&server);
    let unserved: Vec<String> = resources(&after).difference(&served).cloned().collect();
    assert!(
        unserved.is_empty(),
        "unserved resources label series: {unserved:?}"
    );
    // The made-up paths share the empty resource: a verb and a code per
    // kind of answer (401 or 403, 404, 405) may be new; a thousand may not.
    let unlabelled = |series: &[String]| {
        series
            .iter()
            .filter(|s| s.starts_with("apiserver_request_total") && s.contains("resource=\"\""))
            .count()
    };
    let added = unlabelled(&after).saturating_sub(unlabelled(&before));
    assert!(added < 30, "{added} new request series: {after:?}");
}

#[test]
fn one_user_holds_at_most_its_bound_of_open_watches() {
    let server = Embedded::start_with(&["--simulated-nodes", "0", "--max-watches-per-user", "3"]);
    let path = "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=300";
    let watches: Vec<WatchEvents> = (0..3)
        .map(|_| WatchEvents::open(server.port, path))
        .collect();
    let refused = send(&server, "GET", path, "application/json", &[]);
    assert_eq!(refused.status, 429, "{}", refused.text());
    assert_eq!(
        refused.header("retry-after"),
        ["1"],
        "{:?}",
        refused.headers
    );
    assert_refused(&refused, "");
    drop(watches);
    wait_for(WAIT, "a closed watch to free its slot", || {
        let again = Connection::connect(server.port)
            .and_then(|mut c| {
                c.send(
                    "GET",
                    &path.replace("300", "1"),
                    &[("Accept", "application/json")],
                    &[],
                )
            })
            .ok()?;
        (again.status == 200).then_some(())
    });
    assert_alive(&server);
}
