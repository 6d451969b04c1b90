//! `capstan certificates`: the certificates of a control plane spread over
//! several processes or containers (`make cluster`, compose.yaml), made
//! once into one folder that every member and API server reads, as
//! `kubeadm init phase certs` does for a kubeadm cluster: the API
//! servers' CAs, serving certificate and admin client certificate, the
//! service-account key, the store's CA with one certificate per member and
//! the store client certificate, an admin kubeconfig, the simulated
//! nodes' own kubeconfig (`nodes.kubeconfig`), and the
//! EncryptionConfiguration every API server is given so that Secrets are
//! encrypted at rest with one key (`encryption-config.yaml`, as `capstan`
//! makes for itself). Files that exist are kept, so running it again is
//! harmless.

use std::path::{Path, PathBuf};

use capstan_apiserver::pki::{self, Pki};
use capstan_nodes::impersonation::SIMULATOR_USER as NODE_SIMULATOR_USER;
use clap::Args;

use crate::{encryption, kubeconfig, nodes};

#[derive(Debug, Clone, Args)]
pub struct CertificatesFlags {
    /// Folder to write the certificates and keys into.
    #[arg(long)]
    pub dir: PathBuf,
    /// A store member and the names (DNS names or IP addresses) its
    /// certificate covers: `NAME=SAN,SAN...`; repeat for each member.
    #[arg(long = "store-member", value_name = "NAME=SANS")]
    pub store_members: Vec<String>,
    /// Extra names for the API servers' serving certificate, besides
    /// 127.0.0.1, localhost and the host name.
    #[arg(long, value_delimiter = ',')]
    pub tls_san: Vec<String>,
    /// The API server URL the admin kubeconfig (written as `<dir>/kubeconfig`)
    /// points at, e.g. the load balancer's.
    #[arg(long, default_value = "https://127.0.0.1:6443")]
    pub server: String,
}

#[derive(Debug, thiserror::Error)]
pub enum CertificatesError {
    #[error("--store-member {0:?}: expected NAME=SAN,SAN...")]
    Member(String),
    #[error(transparent)]
    Pki(#[from] pki::PkiError),
    #[error("writing the kubeconfig: {0}")]
    Kubeconfig(#[source] std::io::Error),
    #[error("the simulated nodes' certificate: {0}")]
    Identity(String),
    #[error("writing the encryption configuration: {0}")]
    Encryption(#[source] std::io::Error),
}

/// Makes what is missing and writes the kubeconfig; returns its path.
pub fn generate(flags: &CertificatesFlags) -> Result<PathBuf, CertificatesError> {
    let members = flags
        .store_members
        .iter()
        .map(|text| parse_member(text))
        .collect::<Result<Vec<_>, _>>()?;
    let pki = Pki::at(&flags.dir);
    pki.ensure(&pki::serving_names(&flags.tls_san))?;
    pki.ensure_store(&members)?;
    encryption::ensure(&flags.dir).map_err(CertificatesError::Encryption)?;
    write_nodes_kubeconfig(&flags.dir, &flags.server, &pki)?;
    kubeconfig::write(&flags.dir, &flags.server, &pki).map_err(CertificatesError::Kubeconfig)
}

/// `<dir>/nodes.kubeconfig`, the simulated nodes' process's own identity
/// (`system:capstan-nodes`), so that `capstan-nodes` need not run as the
/// admin; kept when it exists.
fn write_nodes_kubeconfig(dir: &Path, server: &str, pki: &Pki) -> Result<(), CertificatesError> {
    let path = dir.join("nodes.kubeconfig");
    if path.exists() {
        return Ok(());
    }
    let (cert_pem, key_pem) = nodes::issue_identity(pki).map_err(CertificatesError::Identity)?;
    let identity = kubeconfig::Identity {
        user: NODE_SIMULATOR_USER,
        cert_pem: cert_pem.into_bytes(),
        key_pem: key_pem.into_bytes(),
    };
    let ca = std::fs::read(pki.server_ca()).map_err(CertificatesError::Kubeconfig)?;
    kubeconfig::write_to(&path, server, &ca, &identity).map_err(CertificatesError::Kubeconfig)
}

/// `NAME=SAN,SAN` into the name and its names.
fn parse_member(text: &str) -> Result<(String, Vec<String>), CertificatesError> {
    let (name, sans) = text
        .split_once('=')
        .ok_or_else(|| CertificatesError::Member(text.to_string()))?;
    let sans: Vec<String> = sans
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if name.is_empty() || sans.is_empty() {
        return Err(CertificatesError::Member(text.to_string()));
    }
    Ok((name.to_string(), sans))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_needs_a_name_and_names() {
        let (name, sans) = parse_member("store1=store1, 127.0.0.1").unwrap();
        assert_eq!(name, "store1");
        assert_eq!(sans, ["store1", "127.0.0.1"]);
        for bad in ["store1", "=a", "store1="] {
            assert!(parse_member(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn generate_writes_every_file_and_a_kubeconfig() {
        let dir = tempfile::tempdir().unwrap();
        let flags = CertificatesFlags {
            dir: dir.path().join("pki"),
            store_members: vec!["m1=127.0.0.1".into(), "m2=127.0.0.1".into()],
            tls_san: vec![],
            server: "https://127.0.0.1:8443".into(),
        };
        let kubeconfig = generate(&flags).unwrap();
        let text = std::fs::read_to_string(kubeconfig).unwrap();
        assert!(text.contains("server: https://127.0.0.1:8443"), "{text}");
        let pki = Pki::at(&flags.dir);
        for file in [
            pki.store_member_cert("m1"),
            pki.store_member_cert("m2"),
            pki.store_client_cert(),
            pki.admin_cert(),
            pki.serving_cert(),
            pki.kubelet_client_cert(),
            flags.dir.join("encryption-config.yaml"),
            flags.dir.join("nodes.kubeconfig"),
        ] {
            assert!(file.exists(), "{}", file.display());
        }
    }
}
