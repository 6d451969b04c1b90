//! How requests reach the server: HTTPS with rustls on the secure port
//! (client certificates asked for, not required), and, only when a flag
//! asks, plain HTTP on loopback. Each connection is tagged with what the
//! authenticators need to know about it (see [`Peer`]).

pub mod tls;

use std::any::Any;

use actix_web::dev::Extensions;
use rustls_pki_types::CertificateDer;

/// What a connection tells the authenticators, stored in its extensions
/// and read back with `HttpRequest::conn_data::<Peer>()`.
#[derive(Debug, Clone)]
pub enum Peer {
    /// A TLS connection; the client's certificate chain, leaf first
    /// (empty when it sent none).
    Tls(Vec<CertificateDer<'static>>),
    /// A plain HTTP connection to the loopback-only insecure port.
    Insecure,
}

/// The `on_connect` hook: tags each new connection with its [`Peer`].
pub fn tag_connection(connection: &dyn Any, extensions: &mut Extensions) {
    type TlsStream = actix_tls::accept::rustls_0_23::TlsStream<actix_web::rt::net::TcpStream>;
    if let Some(stream) = connection.downcast_ref::<TlsStream>() {
        let (_, session) = stream.get_ref();
        let chain = session
            .peer_certificates()
            .map(|certs| certs.iter().map(|c| c.clone().into_owned()).collect())
            .unwrap_or_default();
        extensions.insert(Peer::Tls(chain));
    } else if connection
        .downcast_ref::<actix_web::rt::net::TcpStream>()
        .is_some()
    {
        extensions.insert(Peer::Insecure);
    }
}
