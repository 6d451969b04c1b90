//! Fuzzing the store's gRPC port of the embedded default (`capstan`):
//! random bytes, plain and inside TLS, and seeded mutations of valid etcd
//! requests. Every message must get a gRPC status (never a dropped
//! server), a refused one must write nothing, and the store must stay
//! healthy. `make test` runs a short run; `make fuzz` a long one
//! (`CAPSTAN_FUZZ_CONNECTIONS`, `CAPSTAN_FUZZ_MESSAGES`, `CAPSTAN_FUZZ_SEED`).

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use capstan_tests::apiserver::Embedded;
use capstan_tests::mutate::{fuzz_setting, mutate_bytes};
use capstan_tests::store::http_get;
use capstan_tests::tls::{self, Identity};
use rand::{Rng, SeedableRng};

/// Random bytes on the store's gRPC port, half of them raw (the TLS
/// handshake sees them) and half inside a TLS session with the store's
/// client certificate, some of those after the HTTP/2 preface: each
/// connection is closed or answered, and the store keeps serving.
#[test]
fn random_bytes_on_the_store_port_leave_it_serving() {
    let seed = fuzz_setting("CAPSTAN_FUZZ_SEED", 14);
    let count = fuzz_setting("CAPSTAN_FUZZ_CONNECTIONS", 100);
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
    let seed = fuzz_setting("CAPSTAN_FUZZ_SEED", 14);
    let count = fuzz_setting("CAPSTAN_FUZZ_MESSAGES", 400);
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
        mutate_bytes(&mut rng, &mut message);
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
