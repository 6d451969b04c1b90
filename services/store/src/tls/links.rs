//! rustls configurations for the peer port when it serves TLS: the server
//! side, which also terminates the peer gRPC service's connections, and
//! the client side the Ready loop's direct links dial with
//! (`transport::links`).
//! Both come from the same `--peer-*` files and mean what they mean for
//! gRPC: the member's certificate on both sides, the trusted CA for the
//! other end, and a client certificate required with
//! `--peer-client-cert-auth`.

use std::sync::{Arc, OnceLock};

use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{ClientConfig, RootCertStore, ServerConfig};

use super::pem::read;
use crate::config::tls::Side;
use crate::error::{Result, StoreError};

/// What a direct link asks for in the handshake (ALPN); gRPC asks "h2".
pub const LINK_ALPN: &[u8] = b"capstan-raft/1";
const H2_ALPN: &[u8] = b"h2";

impl Side {
    /// The peer port's TLS, for links and gRPC alike; None for plain.
    pub fn link_server(&self, prefix: &str) -> Result<Option<Arc<ServerConfig>>> {
        if !self.enabled() {
            return Ok(None);
        }
        let builder = ServerConfig::builder();
        let builder = match self.trusted_roots(prefix)? {
            None => builder.with_no_client_auth(),
            Some(roots) => {
                let verifier = WebPkiClientVerifier::builder(Arc::new(roots));
                let verifier = match self.client_cert_auth {
                    true => verifier,
                    false => verifier.allow_unauthenticated(),
                };
                let verifier = verifier.build().map_err(|err| {
                    config_error(prefix, "trusted-ca-file", &self.trusted_ca_file, err)
                })?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let (chain, key) = self.identity(prefix)?;
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|err| config_error(prefix, "key-file", &self.key_file, err))?;
        config.alpn_protocols = vec![LINK_ALPN.to_vec(), H2_ALPN.to_vec()];
        Ok(Some(Arc::new(config)))
    }

    /// How a direct link dials an `https://` peer.
    pub fn link_client(&self, prefix: &str) -> Result<Arc<ClientConfig>> {
        let roots = self
            .trusted_roots(prefix)?
            .unwrap_or_else(RootCertStore::empty);
        let builder = ClientConfig::builder().with_root_certificates(roots);
        let mut config = match self.enabled() {
            true => {
                let (chain, key) = self.identity(prefix)?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|err| config_error(prefix, "key-file", &self.key_file, err))?
            }
            false => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![LINK_ALPN.to_vec()];
        Ok(Arc::new(config))
    }

    fn trusted_roots(&self, prefix: &str) -> Result<Option<RootCertStore>> {
        if self.trusted_ca_file.is_empty() {
            return Ok(None);
        }
        let flag = format!("{prefix}trusted-ca-file");
        let pem = read(&flag, &self.trusted_ca_file)?;
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|err| {
                config_error(prefix, "trusted-ca-file", &self.trusted_ca_file, err)
            })?;
            roots.add(cert).map_err(|err| {
                config_error(prefix, "trusted-ca-file", &self.trusted_ca_file, err)
            })?;
        }
        Ok(Some(roots))
    }

    fn identity(
        &self,
        prefix: &str,
    ) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
        let chain = super::certificate_chain(&format!("{prefix}cert-file"), &self.cert_file)?;
        let pem = read(&format!("{prefix}key-file"), &self.key_file)?;
        let key = PrivateKeyDer::from_pem_slice(&pem)
            .map_err(|err| config_error(prefix, "key-file", &self.key_file, err))?;
        Ok((chain, key))
    }
}

fn config_error(prefix: &str, flag: &str, path: &str, err: impl std::fmt::Display) -> StoreError {
    StoreError::Config(format!("--{prefix}{flag} {path}: {err}"))
}

/// How this member's direct links dial `https://` peers, set once at start
/// (a process runs one member). Unset, such peers are reached over gRPC.
static LINK_CLIENT: OnceLock<Arc<ClientConfig>> = OnceLock::new();

pub fn set_link_client(config: Arc<ClientConfig>) {
    let _ = LINK_CLIENT.set(config);
}

pub fn link_client() -> Option<Arc<ClientConfig>> {
    LINK_CLIENT.get().cloned()
}
