//! The kubeconfig `capstan` writes so kubectl works at once: the API
//! server's address and CA, and the admin's client certificate and key,
//! all embedded.

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use capstan_apiserver::pki::{files, Pki};

/// Writes `<data_dir>/kubeconfig` for `server` (an `https://` URL) with
/// the credentials of `pki`, readable by its owner only (also when an
/// older one was not); returns its path.
pub fn write(data_dir: &Path, server: &str, pki: &Pki) -> std::io::Result<PathBuf> {
    let encoded =
        |path: PathBuf| -> std::io::Result<String> { Ok(STANDARD.encode(std::fs::read(path)?)) };
    let ca = encoded(pki.server_ca())?;
    let cert = encoded(pki.admin_cert())?;
    let key = encoded(pki.admin_key())?;
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: capstan\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n\
contexts:\n- name: capstan\n  context:\n    cluster: capstan\n    user: admin\n    namespace: default\n\
current-context: capstan\nusers:\n- name: admin\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\n"
    );
    let path = data_dir.join("kubeconfig");
    files::write_private(&path, text.as_bytes())?;
    Ok(path)
}
