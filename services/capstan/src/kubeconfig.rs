//! The kubeconfig `capstan` writes so kubectl works at once.

use std::path::{Path, PathBuf};

/// Writes `<data_dir>/kubeconfig` pointing at `server`; returns its path.
pub fn write(data_dir: &Path, server: &str) -> std::io::Result<PathBuf> {
    let path = data_dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: capstan\n  cluster:\n    server: {server}\n\
contexts:\n- name: capstan\n  context:\n    cluster: capstan\n    user: capstan\n    namespace: default\n\
current-context: capstan\nusers:\n- name: capstan\n  user: {{}}\n"
    );
    std::fs::create_dir_all(data_dir)?;
    std::fs::write(&path, text)?;
    Ok(path)
}
