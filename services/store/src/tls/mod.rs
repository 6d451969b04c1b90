//! TLS for the client and peer ports, with etcd's flags and meanings:
//! `--cert-file`/`--key-file` serve clients over HTTPS, `--trusted-ca-file`
//! with `--client-cert-auth` admits only clients whose certificate that CA
//! signed; the `--peer-*` flags do the same for raft traffic, and a member
//! dials `https://` peer URLs with its peer certificate as the client's.
//!
//! The flags themselves are settings (`config::tls`); here they become
//! tonic's and rustls's configurations. The files are read once at start;
//! a missing or unreadable one stops start-up with a message naming the
//! flag and the file.

mod links;
mod pem;

use std::sync::OnceLock;

use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity, ServerTlsConfig};

pub use crate::config::tls::{Side, TlsFlags, TlsSettings};
use crate::error::Result;
pub use links::{link_client, set_link_client, LINK_ALPN};
use pem::read;

/// The certificate chain in the PEM file `path` (given as `--{flag}`).
pub fn certificate_chain(
    flag: &str,
    path: &str,
) -> Result<Vec<tokio_rustls::rustls::pki_types::CertificateDer<'static>>> {
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    let pem = read(flag, path)?;
    tokio_rustls::rustls::pki_types::CertificateDer::pem_slice_iter(&pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|err| crate::error::StoreError::Config(format!("--{flag} {path}: {err}")))
}

impl Side {
    /// The server side, or None for plain HTTP.
    pub fn server(&self, prefix: &str) -> Result<Option<ServerTlsConfig>> {
        if !self.enabled() {
            return Ok(None);
        }
        let identity = Identity::from_pem(
            read(&format!("{prefix}cert-file"), &self.cert_file)?,
            read(&format!("{prefix}key-file"), &self.key_file)?,
        );
        let mut config = ServerTlsConfig::new().identity(identity);
        if !self.trusted_ca_file.is_empty() {
            let ca = read(&format!("{prefix}trusted-ca-file"), &self.trusted_ca_file)?;
            config = config
                .client_ca_root(Certificate::from_pem(ca))
                .client_auth_optional(!self.client_cert_auth);
        }
        Ok(Some(config))
    }

    /// The client side, for dialing another member's `https://` URL.
    pub fn client(&self, prefix: &str) -> Result<ClientTlsConfig> {
        let mut config = ClientTlsConfig::new();
        if !self.trusted_ca_file.is_empty() {
            let ca = read(&format!("{prefix}trusted-ca-file"), &self.trusted_ca_file)?;
            config = config.ca_certificate(Certificate::from_pem(ca));
        }
        if self.enabled() {
            config = config.identity(Identity::from_pem(
                read(&format!("{prefix}cert-file"), &self.cert_file)?,
                read(&format!("{prefix}key-file"), &self.key_file)?,
            ));
        }
        Ok(config)
    }
}

/// How this member dials its peers, set once at start (the peer links
/// and the request forwarding both dial, from deep inside raft's
/// transport; a process runs one member).
static PEER_CLIENT: OnceLock<ClientTlsConfig> = OnceLock::new();

pub fn set_peer_client(config: ClientTlsConfig) {
    let _ = PEER_CLIENT.set(config);
}

/// An endpoint for a peer URL: TLS for `https://`, plain otherwise.
pub fn peer_endpoint(url: &str) -> std::result::Result<Endpoint, tonic::transport::Error> {
    let endpoint = Endpoint::from_shared(url.to_string())?;
    match (url.starts_with("https://"), PEER_CLIENT.get()) {
        (true, Some(config)) => endpoint.tls_config(config.clone()),
        (true, None) => endpoint.tls_config(ClientTlsConfig::new()),
        (false, _) => Ok(endpoint),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_a_configuration_is_refused_with_the_flags_named() {
        let only_cert = Side {
            cert_file: "c.pem".into(),
            ..Side::default()
        };
        let err = only_cert.validate("peer-").unwrap_err().to_string();
        assert!(
            err.contains("--peer-cert-file and --peer-key-file"),
            "{err}"
        );
        let auth_without_ca = Side {
            client_cert_auth: true,
            ..Side::default()
        };
        let err = auth_without_ca.validate("").unwrap_err().to_string();
        assert!(
            err.contains("--client-cert-auth needs --trusted-ca-file"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_or_non_pem_file_names_the_flag_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("not-pem.txt");
        std::fs::write(&text, "hello").unwrap();
        let side = Side {
            cert_file: text.display().to_string(),
            key_file: dir.path().join("absent.key").display().to_string(),
            ..Side::default()
        };
        let err = side.server("").unwrap_err().to_string();
        assert!(
            err.contains("--cert-file") && err.contains("not a PEM file"),
            "{err}"
        );
        let side = Side {
            cert_file: dir.path().join("absent.pem").display().to_string(),
            key_file: "k".into(),
            ..Side::default()
        };
        let err = side.server("peer-").unwrap_err().to_string();
        assert!(
            err.contains("--peer-cert-file") && err.contains("absent.pem"),
            "{err}"
        );
    }
}
