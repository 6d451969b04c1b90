//! Fuzzing the REST decoders of the embedded default (`capstan`) through
//! its real port: seeded, mutated requests (JSON, YAML and protobuf
//! bodies, the four patch types). Every request must get a `Status` of
//! the right class (never a 5xx or a dropped connection), a refused
//! request must write nothing, and the server must stay healthy. The
//! store's gRPC port is fuzzed in `fuzz_grpc.rs`. `make test` runs a
//! short run; `make fuzz` a long one (`CAPSTAN_FUZZ_REQUESTS`,
//! `CAPSTAN_FUZZ_SEED`).

use std::collections::BTreeMap;

use capstan_tests::apiserver::Embedded;
use capstan_tests::http::{Connection, Response};
use capstan_tests::mutate::{fuzz_setting, mutate_bytes, FuzzRequest, Mutator};
use capstan_tests::store::http_get;
use rand::SeedableRng;
use serde_json::{json, Value};

const NAMESPACE: &str = "fuzz";
const TARGET: &str = "target";
/// The codes a refused request may get: the body or the request is wrong.
const REFUSALS: [u16; 6] = [400, 404, 409, 413, 415, 422];

/// Every ConfigMap in every namespace (a mutated body may name another
/// one): namespace/name -> (resourceVersion, labels, data).
fn listing(port: u16) -> BTreeMap<String, (String, Value, Value)> {
    let (status, list) = Connection::connect(port)
        .and_then(|mut c| c.json("GET", "/api/v1/configmaps", None))
        .unwrap_or_else(|e| panic!("listing the ConfigMaps: {e}"));
    assert_eq!(status, 200, "list: {list}");
    let items = list["items"].as_array().expect("a list has items");
    items
        .iter()
        // The root CA publisher writes one into every namespace on its own
        // time, whatever the requests do.
        .filter(|item| item["metadata"]["name"] != "kube-root-ca.crt")
        .map(|item| {
            let meta = &item["metadata"];
            let key = format!(
                "{}/{}",
                meta["namespace"].as_str().unwrap_or_default(),
                meta["name"].as_str().expect("a name")
            );
            let version = meta["resourceVersion"].as_str().expect("a version");
            (
                key,
                (
                    version.to_string(),
                    meta["labels"].clone(),
                    item["data"].clone(),
                ),
            )
        })
        .collect()
}

/// A refusal is a Status object naming the same code and a reason.
fn check_refusal(index: usize, request: &FuzzRequest, response: &Response) {
    let context = || format!("request {index} ({request:?}) got {}", response.status);
    assert!(
        REFUSALS.contains(&response.status),
        "{}: not a client-error class: {}",
        context(),
        response.text()
    );
    let status = response
        .json()
        .unwrap_or_else(|e| panic!("{}: the body is not a Status: {e}", context()));
    assert_eq!(status["kind"], "Status", "{}: {status}", context());
    assert_eq!(status["status"], "Failure", "{}: {status}", context());
    assert_eq!(status["code"], response.status, "{}: {status}", context());
    assert!(
        status["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{}: a Status has a reason: {status}",
        context()
    );
}

/// Each fuzzed request on a connection of its own: a server may close a
/// connection after refusing a body it did not read to the end, which is
/// fine, but then the connection's next request would be lost.
fn send(port: u16, index: usize, request: &FuzzRequest) -> Response {
    let headers = [
        ("Accept", "application/json"),
        ("Content-Type", request.content_type),
        ("Connection", "close"),
    ];
    Connection::connect(port)
        .and_then(|mut c| c.send(request.method, &request.path, &headers, &request.body))
        .unwrap_or_else(|e| panic!("request {index} ({request:?}) got no response: {e}"))
}

fn setup(port: u16) -> Connection {
    let mut connection = Connection::connect(port).expect("connect to the API server");
    let namespace =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    let (status, body) = connection
        .json("POST", "/api/v1/namespaces", Some(&namespace))
        .expect("create the namespace");
    assert_eq!(status, 201, "{body}");
    let target = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": TARGET}, "data": {"fuzz": "start"}});
    let path = format!("/api/v1/namespaces/{NAMESPACE}/configmaps");
    let (status, body) = connection
        .json("POST", &path, Some(&target))
        .expect("create the target");
    assert_eq!(status, 201, "{body}");
    connection
}

/// Deeply nested bodies are built, encoded and dropped recursively in
/// this process too: the run gets a stack to match.
#[test]
fn mutated_requests_get_a_status_and_refused_ones_write_nothing() {
    std::thread::Builder::new()
        .name("mutated_requests_get_a_status_and_refused_ones_write_nothing".into())
        .stack_size(512 << 20)
        .spawn(fuzz_rest)
        .expect("start the fuzz thread")
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
}

fn fuzz_rest() {
    let seed = fuzz_setting("CAPSTAN_FUZZ_SEED", 14);
    let count = fuzz_setting("CAPSTAN_FUZZ_REQUESTS", 250) as usize;
    eprintln!("REST fuzz: seed {seed} (CAPSTAN_FUZZ_SEED), {count} requests");
    let server = Embedded::start();
    setup(server.port);
    let mut mutator = Mutator::new(seed, NAMESPACE);
    let mut before = listing(server.port);
    let mut codes: BTreeMap<u16, usize> = BTreeMap::new();
    for index in 0..count {
        let request = mutator.next(TARGET, &format!("fresh-{index}"));
        let response = send(server.port, index, &request);
        *codes.entry(response.status).or_default() += 1;
        let after = listing(server.port);
        if response.status >= 300 {
            check_refusal(index, &request, &response);
            assert_eq!(after, before, "refused request {index} ({request:?}) wrote");
        }
        if request.mutation == "none" {
            // A valid request: accepted, and its new value is stored.
            assert!(
                response.status < 300 && after != before,
                "unmutated request {index} ({request:?}) got {}: {}",
                response.status,
                response.text()
            );
        }
        before = after;
    }
    eprintln!("seed {seed}, {count} requests, answers by code: {codes:?}");
    let refused: usize = codes
        .iter()
        .filter(|(c, _)| **c >= 300)
        .map(|(_, n)| n)
        .sum();
    assert!(
        refused > 0 && refused < count,
        "both outcomes seen: {codes:?}"
    );
    assert!(http_get(server.port, "/readyz").is_some(), "still ready");
}

/// Small bodies that ask for far more than they are: a YAML alias bomb
/// (as a create and as an apply patch), a JSON patch whose copies double
/// a list, one whose moves nest chains past the depth limit, and bodies
/// nested deeper than the server keeps. Each is refused as it is; bit
/// flips and truncations of it are refused (writing nothing) or taken.
fn attack_shapes() -> Vec<FuzzRequest> {
    let collection = format!("/api/v1/namespaces/{NAMESPACE}/configmaps");
    let target = format!("{collection}/{TARGET}");
    let strings = vec!["\"0123456789abcdef\""; 500].join(", ");
    let twenty = |name: &str| vec![format!("*{name}"); 20].join(", ");
    let bomb = |name: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\n\
             laughs:\n  a: &a [{strings}]\n  b: &b [{}]\n  c: [{}]\n",
            twenty("a"),
            twenty("b")
        )
    };
    let mut copies = vec![json!({"op": "add", "path": "/laughs", "value": ["x".repeat(4096)]})];
    copies.extend((0..12).map(|_| json!({"op": "copy", "from": "/laughs", "path": "/laughs/-"})));
    let chain = |depth: usize| (0..depth).fold(json!(0), |inner, _| json!({ "n": inner }));
    let bottom = |top: &str| format!("/{top}{}", "/n".repeat(59));
    let moves = json!([
        {"op": "add", "path": "/a", "value": chain(60)},
        {"op": "add", "path": "/b", "value": chain(60)},
        {"op": "move", "from": "/a", "path": format!("{}/a", bottom("b"))},
    ]);
    let deep = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "deep", "annotations": chain(110)}});
    let shape = |method, path: &str, content_type, body: Vec<u8>, what: &str| FuzzRequest {
        method,
        path: path.to_string(),
        content_type,
        body,
        mutation: format!("attack: {what}"),
    };
    let apply = format!("{target}?fieldManager=fuzz&force=true");
    vec![
        shape(
            "POST",
            &collection,
            "application/yaml",
            bomb("laughs").into_bytes(),
            "YAML aliases",
        ),
        shape(
            "PATCH",
            &apply,
            "application/apply-patch+yaml",
            bomb(TARGET).into_bytes(),
            "YAML aliases in an apply",
        ),
        shape(
            "PATCH",
            &target,
            "application/json-patch+json",
            Value::from(copies).to_string().into_bytes(),
            "copy chain",
        ),
        shape(
            "PATCH",
            &target,
            "application/json-patch+json",
            moves.to_string().into_bytes(),
            "nesting moves",
        ),
        shape(
            "POST",
            &collection,
            "application/json",
            deep.to_string().into_bytes(),
            "110 levels",
        ),
        shape(
            "PATCH",
            &target,
            "application/merge-patch+json",
            json!({"metadata": {"annotations": chain(110)}})
                .to_string()
                .into_bytes(),
            "a deep merge patch",
        ),
    ]
}

#[test]
fn attack_shapes_and_their_mutations_get_a_status_and_write_nothing() {
    let seed = fuzz_setting("CAPSTAN_FUZZ_SEED", 14);
    let server = Embedded::start();
    setup(server.port);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut before = listing(server.port);
    for (index, attack) in attack_shapes().into_iter().enumerate() {
        let mut variants = vec![attack.clone()];
        for _ in 0..4 {
            let mut mutated = attack.clone();
            mutate_bytes(&mut rng, &mut mutated.body);
            mutated.mutation = format!("{}, mutated", attack.mutation);
            variants.push(mutated);
        }
        for (i, request) in variants.iter().enumerate() {
            let response = send(server.port, index, request);
            let after = listing(server.port);
            if i == 0 || response.status >= 300 {
                check_refusal(index, request, &response);
                assert_eq!(after, before, "refused request {index} ({request:?}) wrote");
            }
            before = after;
        }
    }
    assert!(http_get(server.port, "/readyz").is_some(), "still ready");
}

/// kube-apiserver names an unknown field as Go's `%q` quotes it, so a
/// control character in the name becomes an escape and the `Warning`
/// header stays valid (it was a 500 "failed to parse header value").
#[test]
fn a_control_character_in_an_unknown_field_name_is_escaped_in_the_warning() {
    let server = Embedded::start();
    let mut connection = setup(server.port);
    let path = format!("/api/v1/namespaces/{NAMESPACE}/configmaps/{TARGET}");
    let patch = json!({"metadata": {"\u{7f}amespace": "x", "quote\"d": 1}, "data": {"a": "b"}});
    let body = patch.to_string();
    let headers = [
        ("Accept", "application/json"),
        ("Content-Type", "application/strategic-merge-patch+json"),
    ];
    let response = connection
        .send("PATCH", &path, &headers, body.as_bytes())
        .expect("a response");
    assert_eq!(response.status, 200, "{}", response.text());
    let mut warnings = response.header("warning");
    warnings.sort();
    assert_eq!(
        warnings,
        [
            r#"299 - "unknown field \"metadata.\\x7famespace\"""#,
            r#"299 - "unknown field \"metadata.quote\\\"d\"""#,
        ],
        "escaped as kube-apiserver does"
    );
    assert_eq!(response.json().expect("the object")["data"]["a"], "b");

    let strict = format!("{path}?fieldValidation=Strict");
    let response = connection
        .send("PATCH", &strict, &headers, body.as_bytes())
        .expect("a response");
    assert_eq!(response.status, 400, "{}", response.text());
    let message = response.json().expect("a Status")["message"].clone();
    assert!(
        message
            .as_str()
            .is_some_and(|m| m.contains(r#"unknown field "metadata.\x7famespace""#)),
        "{message}"
    );
}
