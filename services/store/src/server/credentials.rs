//! Who a client request comes from, found as etcd finds it: the token in
//! the `token` metadata (`authorization` for gRPC-gateway clients),
//! else, when `--client-cert-auth` is on, the common name of the client's
//! certificate, which the TLS handshake already verified against
//! `--trusted-ca-file`. With auth off nobody needs an identity, and
//! tokens are not looked at.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use capstan_proto::internal::Caller;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

use super::context::Context;
use super::in_process::InProcessPeer;
use crate::error::Result;

/// How long a simple token may wait for this member to apply the login
/// that made it (on another member, a moment ago).
const TOKEN_PATIENCE: Duration = Duration::from_secs(2);

/// The metadata keys etcd clients put their token under.
const TOKEN_KEYS: [&str; 2] = ["token", "authorization"];

/// What a request presented, read once when it arrives (a stream keeps
/// it and finds its caller again for each request it carries). The
/// certificate is parsed only when auth is on and no token was given.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    token: Option<String>,
    certificates: Option<Arc<Vec<CertificateDer<'static>>>>,
}

impl Credentials {
    /// The credentials of `request`; the certificate counts only with
    /// `--client-cert-auth`, as in etcd.
    pub fn of<T>(request: &Request<T>, client_cert_auth: bool) -> Credentials {
        Credentials {
            token: token(request.metadata()),
            certificates: client_cert_auth
                .then(|| request.peer_certs().or_else(|| in_process(request)))
                .flatten(),
        }
    }

    /// The common name of the client's (verified) certificate.
    fn common_name(&self) -> Option<String> {
        let chain = self.certificates.as_ref()?;
        common_name(chain.first()?)
    }
}

/// The chain an in-process caller stands for (see `in_process.rs`).
fn in_process<T>(request: &Request<T>) -> Option<Arc<Vec<CertificateDer<'static>>>> {
    let peer = request.extensions().get::<InProcessPeer>()?;
    Some(peer.0.clone())
}

fn token(metadata: &MetadataMap) -> Option<String> {
    TOKEN_KEYS
        .iter()
        .find_map(|key| metadata.get(*key))
        .and_then(|value| value.to_str().ok())
        .map(str::to_string)
}

/// The subject's common name of a DER certificate.
fn common_name(der: &[u8]) -> Option<String> {
    let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
    let name = certificate.subject().iter_common_name().next()?;
    name.as_str().ok().map(str::to_string)
}

impl Context {
    /// The caller `credentials` name under the rules as they are now. A
    /// simple token is known only once this member has applied the
    /// authentication that made it, so an unknown one waits for that.
    pub async fn caller(&self, credentials: &Credentials) -> Result<Caller> {
        if !self.auth.is_enabled() {
            return Ok(Caller::default());
        }
        if let Some(token) = &credentials.token {
            let known = self.auth.caller_from_token(token);
            let Some(index) = self.auth.tokens().index_of(token) else {
                return known;
            };
            if known.is_ok() || self.raft.status().applied.load(Ordering::Acquire) >= index {
                return known;
            }
            // A login this member has not applied yet; a forged index past
            // anything committed costs the caller a short wait, no more.
            let _ = self.raft.wait_applied_index(index, TOKEN_PATIENCE).await;
            return self.auth.caller_from_token(token);
        }
        Ok(match credentials.common_name() {
            Some(name) => self.auth.caller_from_certificate(&name),
            None => Caller::default(),
        })
    }

    /// The credentials a request presented, by this member's settings.
    pub fn credentials<T>(&self, request: &Request<T>) -> Credentials {
        Credentials::of(request, self.client_cert_auth)
    }

    /// Runs one unary request: finds its caller, then does `work` with
    /// it, counted and timed (see [`Context::observe`]).
    pub async fn serve<R, T, F>(
        &self,
        method: &'static str,
        request: Request<R>,
        work: impl FnOnce(Caller, R) -> F,
    ) -> std::result::Result<Response<T>, Status>
    where
        F: Future<Output = Result<T>>,
    {
        let credentials = self.credentials(&request);
        let message = request.into_inner();
        let work = async move {
            let caller = self.caller(&credentials).await?;
            work(caller, message).await
        };
        self.observe(method, work).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_comes_from_etcds_metadata_keys() {
        let mut request = Request::new(());
        assert!(Credentials::of(&request, true).token.is_none());
        request
            .metadata_mut()
            .insert("token", "abcdefghijklmnop.5".parse().unwrap());
        let credentials = Credentials::of(&request, true);
        assert_eq!(credentials.token.as_deref(), Some("abcdefghijklmnop.5"));
        assert!(
            credentials.common_name().is_none(),
            "no TLS, no certificate"
        );
    }

    /// A self-signed certificate whose subject's common name is `name`.
    fn certificate_named(name: &str) -> CertificateDer<'static> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.self_signed(&key).unwrap().der().clone()
    }

    #[test]
    fn an_in_process_caller_is_its_chain_with_client_cert_auth_only() {
        let der = certificate_named("embedded");
        let mut request = Request::new(());
        let chain = Arc::new(vec![der]);
        request.extensions_mut().insert(InProcessPeer(chain));
        let with = Credentials::of(&request, true);
        assert_eq!(with.common_name().as_deref(), Some("embedded"));
        assert!(Credentials::of(&request, false).common_name().is_none());
    }

    #[test]
    fn the_common_name_is_read_from_the_certificate() {
        let certificate = certificate_named("kube-apiserver-etcd-client");
        assert_eq!(
            common_name(&certificate).as_deref(),
            Some("kube-apiserver-etcd-client")
        );
        assert_eq!(common_name(b"not a certificate"), None);
    }
}
