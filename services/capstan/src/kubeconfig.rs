//! The kubeconfig `capstan` writes so kubectl works at once: the API
//! server's address and CA, and the admin's client certificate and key,
//! all embedded.

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use capstan_apiserver::pki::Pki;

/// Writes `<data_dir>/kubeconfig` for `server` (an `https://` URL) with
/// the credentials of `pki`, readable by its owner only; returns its path.
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
    write_private(&path, &text)?;
    Ok(path)
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}
