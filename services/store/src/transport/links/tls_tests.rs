//! Direct links over TLS: the peer port's rustls configurations (built
//! from PEM files as the `--peer-*` flags name them) shake hands on the
//! runtime, and the sessions then carry frames on non-blocking sockets.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_proto::peer::RaftBatch;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{self, ClientConfig, ServerConfig};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::conn::Conn;
use super::frame::put_frame;
use crate::tls::{Side, LINK_ALPN};

/// A CA and a member certificate for 127.0.0.1, as PEM files in `dir`.
fn member_files(dir: &Path) -> Side {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    let write = |name: &str, pem: String| {
        let path = dir.join(name);
        std::fs::write(&path, pem).unwrap();
        path.display().to_string()
    };
    Side {
        cert_file: write("member.crt", cert.pem()),
        key_file: write("member.key", key.serialize_pem()),
        trusted_ca_file: write("ca.crt", ca.pem()),
        client_cert_auth: true,
    }
}

/// A handshake over loopback: the server's session or its error, and the
/// client's session if it got one.
async fn handshake(
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
) -> (
    Result<(std::net::TcpStream, rustls::Connection), String>,
    Option<(std::net::TcpStream, rustls::Connection)>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepting = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let tls = TlsAcceptor::from(server).accept(tcp).await;
        let tls = tls.map_err(|err| err.to_string())?;
        if tls.get_ref().1.alpn_protocol() != Some(LINK_ALPN) {
            return Err("not a link".to_string());
        }
        let (tcp, session) = tls.into_inner();
        Ok((tcp.into_std().unwrap(), rustls::Connection::Server(session)))
    });
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let dialed = TlsConnector::from(client).connect(name, tcp).await.ok();
    let dialed = dialed.map(|tls| {
        let (tcp, session) = tls.into_inner();
        (tcp.into_std().unwrap(), rustls::Connection::Client(session))
    });
    (accepting.await.unwrap(), dialed)
}

fn conn((tcp, session): (std::net::TcpStream, rustls::Connection)) -> Conn {
    Conn::new(mio::net::TcpStream::from_std(tcp), Some(Box::new(session)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_link_carries_batches_larger_than_the_sessions_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let side = member_files(dir.path());
    let server = side.link_server("peer-").unwrap().expect("TLS is on");
    let client = side.link_client("peer-").unwrap();
    let (accepted, dialed) = handshake(server, client).await;
    let mut receiver = conn(accepted.expect("the member's certificate is accepted"));
    let mut sender = conn(dialed.expect("the client shook hands"));

    // 4 MiB in 2 batches: far more than rustls seals at once (64 KiB)
    // and than the socket takes, so both wait their turn several times.
    let sent: Vec<RaftBatch> = (0..2u8)
        .map(|i| RaftBatch {
            from: 1,
            cluster_id: 0,
            messages: (0..32).map(|_| vec![i; 64 * 1024]).collect(),
        })
        .collect();
    for batch in &sent {
        put_frame(batch, sender.queue());
    }
    let mut received = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while received.len() < sent.len() {
        assert!(Instant::now() < deadline, "the batches did not arrive");
        sender.flush().unwrap();
        receiver.read(|batch| received.push(batch)).unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(received, sent);
    assert_eq!(sender.backlog(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_without_a_member_certificate_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let side = member_files(dir.path());
    let server = side.link_server("peer-").unwrap().expect("TLS is on");
    let anonymous = Side {
        trusted_ca_file: side.trusted_ca_file.clone(),
        ..Side::default()
    };
    let (accepted, _) = handshake(server, anonymous.link_client("peer-").unwrap()).await;
    let err = accepted.expect_err("a link without certificate was accepted");
    assert!(err.to_lowercase().contains("certificate"), "{err}");
}
