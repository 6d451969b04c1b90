//! Fuzzing the decoders of the embedded default (`capstan`) through its
//! real ports: seeded, mutated REST requests (JSON, YAML and protobuf
//! bodies, the four patch types) and random bytes on the store's gRPC port.
//! Every request must get a `Status` of the right class (never a 5xx or a
//! dropped connection), a refused request must write nothing, and the
//! server must stay healthy. `make test` runs a short run; `make fuzz`
//! a long one (`CAPSTAN_FUZZ_REQUESTS`, `CAPSTAN_FUZZ_SEED`).

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use capstan_tests::apiserver::Embedded;
use capstan_tests::http::{Connection, Response};
use capstan_tests::mutate::{FuzzRequest, Mutator};
use capstan_tests::store::http_get;
use capstan_tests::tls::{self, Identity};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

const NAMESPACE: &str = "fuzz";
const TARGET: &str = "target";
/// The codes a refused request may get: the body or the request is wrong.
const REFUSALS: [u16; 6] = [400, 404, 409, 413, 415, 422];

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v} is not a number"))
        })
        .unwrap_or(default)
}

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
    let seed = setting("CAPSTAN_FUZZ_SEED", 14);
    let count = setting("CAPSTAN_FUZZ_REQUESTS", 250) as usize;
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
    let seed = setting("CAPSTAN_FUZZ_SEED", 14);
    let server = Embedded::start();
    setup(server.port);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut before = listing(server.port);
    for (index, attack) in attack_shapes().into_iter().enumerate() {
        let mut variants = vec![attack.clone()];
        for _ in 0..4 {
            let mut mutated = attack.clone();
            mutate_message(&mut rng, &mut mutated.body);
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

/// Random bytes on the store's gRPC port, half of them raw (the TLS
/// handshake sees them) and half inside a TLS session with the store's
/// client certificate, some of those after the HTTP/2 preface: each
/// connection is closed or answered, and the store keeps serving.
#[test]
fn random_bytes_on_the_store_port_leave_it_serving() {
    let seed = setting("CAPSTAN_FUZZ_SEED", 14);
    let count = setting("CAPSTAN_FUZZ_CONNECTIONS", 100);
    eprintln!("store port fuzz: seed {seed} (CAPSTAN_FUZZ_SEED), {count} connections");
    let server = Embedded::start();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for index in 0..count {
        let socket = TcpStream::connect(("127.0.0.1", server.store_port))
            .unwrap_or_else(|e| panic!("connection {index} refused: {e}"));
        socket
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("a read timeout");
        let in_tls = rng.random_bool(0.5);
        let mut bytes: Vec<u8> = if in_tls && rng.random_bool(0.5) {
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec()
        } else {
            Vec::new()
        };
        let length = rng.random_range(1..2048);
        bytes.extend((0..length).map(|_| rng.random::<u8>()));
        let answered = if in_tls {
            let config = tls::client_config_for(server.store_port, &Identity::Admin)
                .expect("the embedded store serves TLS");
            let name = "127.0.0.1".try_into().expect("an IP name");
            let session = rustls::ClientConnection::new(config, name).expect("a TLS session");
            send_in_tls(session, socket, &bytes)
        } else {
            send_plain(socket, &bytes)
        };
        if let Err(e) = answered {
            panic!("connection {index}: the store neither answered nor closed: {e}");
        }
    }
    let health = http_get(server.store_port, "/health").expect("the store answers /health");
    assert!(health.contains("true"), "{health}");
    assert!(
        http_get(server.port, "/readyz").is_some(),
        "the API server is ready"
    );
}

/// Writes `bytes`, closes the writing half and reads until the server
/// closes. The server may close as soon as it sees garbage: a failed write
/// after that, a reset or a TLS alert is an answer, not an error; only a
/// read that times out is.
fn send_plain(mut socket: TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    let _ = socket.write_all(bytes);
    let _ = socket.shutdown(Shutdown::Write);
    read_until_closed(&mut socket)
}

/// [`send_plain`] inside a TLS session, ended with a close_notify.
fn send_in_tls(
    session: rustls::ClientConnection,
    socket: TcpStream,
    bytes: &[u8],
) -> std::io::Result<()> {
    let mut stream = rustls::StreamOwned::new(session, socket);
    let _ = stream.write_all(bytes).and_then(|()| stream.flush());
    stream.conn.send_close_notify();
    let _ = stream.flush();
    let _ = stream.sock.shutdown(Shutdown::Write);
    read_until_closed(&mut stream)
}

fn read_until_closed(stream: &mut impl Read) -> std::io::Result<()> {
    let mut answer = Vec::new();
    match stream.read_to_end(&mut answer) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Err(e),
        _ => Ok(()),
    }
}

/// A gRPC channel to the embedded store, over TLS with its client
/// certificate.
async fn store_channel(server: &Embedded) -> tonic::transport::Channel {
    let pki = server.pki();
    let read = |path: std::path::PathBuf| std::fs::read(path).expect("read the store PKI");
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(read(
            pki.store_ca(),
        )))
        .identity(tonic::transport::Identity::from_pem(
            read(pki.store_client_cert()),
            read(pki.store_client_key()),
        ));
    tonic::transport::Channel::from_shared(server.store_url())
        .expect("a URL")
        .tls_config(tls)
        .expect("a TLS configuration")
        .connect()
        .await
        .expect("connect to the store")
}

/// A valid request for each fuzzed KV and lease method, encoded.
fn grpc_seeds() -> Vec<(&'static str, Vec<u8>)> {
    use capstan_proto::etcdserverpb as pb;
    use prost::Message;
    let put = pb::PutRequest {
        key: b"fuzz/a".to_vec(),
        value: b"v".to_vec(),
        ..Default::default()
    };
    let txn = pb::TxnRequest {
        compare: vec![pb::Compare {
            key: b"fuzz/a".to_vec(),
            target: pb::compare::CompareTarget::Version as i32,
            result: pb::compare::CompareResult::Greater as i32,
            target_union: Some(pb::compare::TargetUnion::Version(0)),
            ..Default::default()
        }],
        success: vec![pb::RequestOp {
            request: Some(pb::request_op::Request::RequestPut(put.clone())),
        }],
        failure: Vec::new(),
    };
    let range = pb::RangeRequest {
        key: b"fuzz/".to_vec(),
        range_end: b"fuzz0".to_vec(),
        ..Default::default()
    };
    let delete = pb::DeleteRangeRequest {
        key: b"fuzz/b".to_vec(),
        ..Default::default()
    };
    let grant = pb::LeaseGrantRequest { ttl: 60, id: 0 };
    let revoke = pb::LeaseRevokeRequest { id: 7 };
    vec![
        ("/etcdserverpb.KV/Range", range.encode_to_vec()),
        ("/etcdserverpb.KV/Put", put.encode_to_vec()),
        ("/etcdserverpb.KV/DeleteRange", delete.encode_to_vec()),
        ("/etcdserverpb.KV/Txn", txn.encode_to_vec()),
        ("/etcdserverpb.Lease/LeaseGrant", grant.encode_to_vec()),
        ("/etcdserverpb.Lease/LeaseRevoke", revoke.encode_to_vec()),
    ]
}

fn mutate_message(rng: &mut rand::rngs::StdRng, message: &mut Vec<u8>) {
    match rng.random_range(0..4) {
        0 if !message.is_empty() => {
            for _ in 0..rng.random_range(1..6) {
                let at = rng.random_range(0..message.len());
                message[at] ^= 1 << rng.random_range(0..8);
            }
        }
        1 if !message.is_empty() => message.truncate(rng.random_range(0..message.len())),
        2 => message.extend((0..rng.random_range(1..64)).map(|_| rng.random::<u8>())),
        _ => {
            *message = (0..rng.random_range(0..256))
                .map(|_| rng.random())
                .collect()
        }
    }
}

/// The store's revision, read through a normal client.
async fn store_revision(client: &mut etcd_client::Client) -> i64 {
    let response = client
        .get("fuzz/", None)
        .await
        .expect("a range after fuzzing");
    response.header().expect("a header").revision()
}

/// Waits until the store's revision holds still for a second: the API
/// server writes the cluster's own objects (flow-control configuration,
/// service accounts) for a moment after it is ready, and a refusal is
/// checked against the revision.
async fn settle(client: &mut etcd_client::Client) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut last = store_revision(client).await;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = store_revision(client).await;
        if now == last {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the store's revision kept moving for a minute after start"
        );
        last = now;
    }
}

/// What tonic's protobuf decoder answers (with `Internal`, as grpc-go
/// answers for etcd) for a message it cannot decode.
const DECODE_FAILED: &str = "failed to decode Protobuf message";

/// Mutated protobuf messages on the store's real gRPC methods: each gets
/// an answer or a status naming a refusal (an undecodable message is
/// `Internal` saying so, and no other `Internal` is accepted), never a
/// dropped connection; a refused request writes nothing; the store keeps
/// serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutated_grpc_messages_get_a_status_and_refused_ones_write_nothing() {
    use tonic::Code;
    let seed = setting("CAPSTAN_FUZZ_SEED", 14);
    let count = setting("CAPSTAN_FUZZ_MESSAGES", 400);
    eprintln!("gRPC fuzz: seed {seed} (CAPSTAN_FUZZ_SEED), {count} messages");
    // Nothing else may write while a refusal is checked against the
    // revision: no controller manager or scheduler renewing its Lease.
    let server = tokio::task::block_in_place(|| {
        Embedded::start_with(&[
            "--simulated-nodes",
            "0",
            "--disable-controller-manager",
            "--disable-scheduler",
        ])
    });
    let url = server.store_url();
    let channel = store_channel(&server).await;
    let mut client = etcd_client::Client::connect([url], Some(server.store_connect_options()))
        .await
        .expect("connect a client");
    settle(&mut client).await;
    let seeds = grpc_seeds();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut codes: BTreeMap<String, usize> = BTreeMap::new();
    for index in 0..count {
        let (method, seed_message) = &seeds[rng.random_range(0..seeds.len())];
        let mut message = seed_message.clone();
        mutate_message(&mut rng, &mut message);
        let before = store_revision(&mut client).await;
        let answer = tokio::time::timeout(
            Duration::from_secs(30),
            capstan_tests::grpc_raw::call(&channel, method, message.clone()),
        )
        .await
        .unwrap_or_else(|_| panic!("message {index} to {method} got no answer in 30 s"));
        let code = answer.as_ref().err().map_or(Code::Ok, |s| s.code());
        *codes.entry(format!("{code:?}")).or_default() += 1;
        let refused = match answer.as_ref().err() {
            // Only a message the protobuf decoder refused is Internal;
            // an Internal from a handler is a bug, not a refusal.
            Some(status) if code == Code::Internal => status.message().starts_with(DECODE_FAILED),
            Some(_) => matches!(
                code,
                Code::InvalidArgument
                    | Code::OutOfRange
                    | Code::NotFound
                    | Code::FailedPrecondition
                    | Code::ResourceExhausted
            ),
            None => false,
        };
        assert!(
            code == Code::Ok || refused,
            "message {index} to {method} ({message:?}) got {answer:?}"
        );
        if refused {
            let after = store_revision(&mut client).await;
            assert_eq!(after, before, "refused message {index} to {method} wrote");
        }
    }
    eprintln!("gRPC answers by code: {codes:?}");
    assert!(codes.len() > 1, "both outcomes seen: {codes:?}");
    let health = http_get(server.store_port, "/health").expect("the store answers /health");
    assert!(health.contains("true"), "{health}");
}
