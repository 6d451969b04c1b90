//! The kubeconfigs `capstan` writes: the admin's, so kubectl works at
//! once, and (for `capstan certificates`) the simulated nodes' process's
//! own. Each holds the API server's address and CA and one client
//! certificate and key, all embedded, and is readable by its owner only.

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use capstan_apiserver::pki::{files, Pki};

/// Writes `<data_dir>/kubeconfig` for `server` (an `https://` URL) with
/// the admin credentials of `pki`, readable by its owner only (also when
/// an older one was not); returns its path.
pub fn write(data_dir: &Path, server: &str, pki: &Pki) -> std::io::Result<PathBuf> {
    let path = data_dir.join("kubeconfig");
    let identity = Identity {
        user: "admin",
        cert_pem: std::fs::read(pki.admin_cert())?,
        key_pem: std::fs::read(pki.admin_key())?,
    };
    write_to(&path, server, &std::fs::read(pki.server_ca())?, &identity)?;
    Ok(path)
}

/// One client identity: the kubeconfig's user name for it, its
/// certificate and key (PEM).
pub struct Identity<'a> {
    pub user: &'a str,
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

/// Writes a kubeconfig for `server` trusting `ca_pem`, as `identity`.
pub fn write_to(
    path: &Path,
    server: &str,
    ca_pem: &[u8],
    identity: &Identity,
) -> std::io::Result<()> {
    let ca = STANDARD.encode(ca_pem);
    let cert = STANDARD.encode(&identity.cert_pem);
    let key = STANDARD.encode(&identity.key_pem);
    let user = identity.user;
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: capstan\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n\
contexts:\n- name: capstan\n  context:\n    cluster: capstan\n    user: {user}\n    namespace: default\n\
current-context: capstan\nusers:\n- name: {user}\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\n"
    );
    files::write_private(path, text.as_bytes())
}
