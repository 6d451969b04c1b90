//! Where a connection's settings come from: a kubeconfig file
//! (`--kubeconfig`), or inline parts for a component running inside the
//! API server's process (server URL, CA, client certificate and key, as
//! k3s hands its embedded controllers).

use std::path::Path;

use base64::Engine;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

use crate::error::{Error, Result};

/// The parts of a kubeconfig, given in memory: what an in-process
/// component gets from the server it runs beside.
#[derive(Clone, Debug)]
pub struct InlineCredentials {
    /// `https://host:port` of the API server.
    pub server: String,
    /// PEM of the CA that signed the server's certificate.
    pub ca_pem: String,
    /// PEM of the component's client certificate (its user and groups).
    pub cert_pem: String,
    /// PEM of that certificate's private key.
    pub key_pem: String,
}

/// Reads a kubeconfig file's current context into a kube-rs `Config`.
pub async fn config_from_file(path: &Path) -> Result<kube::Config> {
    let wrap = |source| Error::Kubeconfig {
        path: path.to_path_buf(),
        source,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(wrap)?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(wrap)
}

/// Builds a kube-rs `Config` from inline parts, through kube-rs's own
/// kubeconfig loader so both paths validate alike.
pub async fn config_from_inline(credentials: &InlineCredentials) -> Result<kube::Config> {
    if !credentials.server.starts_with("https://") {
        return Err(Error::Settings(format!(
            "server {:?} is not an https:// URL",
            credentials.server
        )));
    }
    let encode = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    // JSON is YAML, so kube-rs's parser reads this document as it reads a file.
    let document = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "inline", "cluster": {
            "server": credentials.server,
            "certificate-authority-data": encode(&credentials.ca_pem),
        }}],
        "users": [{"name": "inline", "user": {
            "client-certificate-data": encode(&credentials.cert_pem),
            "client-key-data": encode(&credentials.key_pem),
        }}],
        "contexts": [{"name": "inline", "context": {"cluster": "inline", "user": "inline"}}],
        "current-context": "inline",
    });
    let settings = |e: kube::config::KubeconfigError| Error::Settings(e.to_string());
    let kubeconfig = Kubeconfig::from_yaml(&document.to_string()).map_err(settings)?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_file_names_the_file() {
        let err = config_from_file(Path::new("/nonexistent/kubeconfig"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("/nonexistent/kubeconfig"), "{err}");
    }

    #[tokio::test]
    async fn inline_parts_refuse_plain_http() {
        let credentials = InlineCredentials {
            server: "http://127.0.0.1:6443".into(),
            ca_pem: String::new(),
            cert_pem: String::new(),
            key_pem: String::new(),
        };
        let err = config_from_inline(&credentials).await.unwrap_err();
        assert!(err.to_string().contains("not an https:// URL"), "{err}");
    }
}
