//! TLS for the tests' clients. A server that support starts registers its
//! port with the folder of its certificates (`capstan_apiserver::pki`), so
//! every helper that connects by port (the raw HTTP client, kubectl's
//! kubeconfig, kube-rs) speaks HTTPS to it, trusting the cluster's CA and,
//! unless told otherwise, presenting the admin's client certificate
//! (`system:admin` in `system:masters`). Ports not registered (a store's
//! /health) stay plain HTTP.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use capstan_apiserver::pki::{self, Pki};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// What serves TLS on a registered port.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Serving {
    ApiServer,
    /// An embedded `capstan`'s store, with the store certificates.
    Store,
}

static SERVERS: Mutex<Option<HashMap<u16, (Serving, PathBuf)>>> = Mutex::new(None);

fn remember(port: u16, serving: Serving, pki_dir: &Path) {
    let mut servers = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
    servers
        .get_or_insert_with(HashMap::new)
        .insert(port, (serving, pki_dir.to_path_buf()));
}

fn registered(port: u16, serving: Serving) -> Option<Pki> {
    let servers = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
    match servers.as_ref()?.get(&port)? {
        (kind, dir) if *kind == serving => Some(Pki::at(dir)),
        _ => None,
    }
}

/// Who a client says it is.
#[derive(Debug, Clone)]
pub enum Identity {
    /// The admin client certificate of the server's PKI.
    Admin,
    /// No credentials at all.
    Anonymous,
    /// A client certificate and its key (PEM).
    Certificate { cert: String, key: String },
    /// A bearer token (and no certificate).
    Token(String),
}

/// Makes (once) the certificates and keys of the servers in `dir`.
pub fn pki_in(dir: &Path) -> Pki {
    let pki = Pki::at(&dir.join("pki"));
    pki.ensure(&pki::serving_names(&[]))
        .expect("make the test cluster's certificates");
    pki
}

/// From now on, connections to `port` speak TLS with the PKI in `pki_dir`.
pub fn register(port: u16, pki_dir: &Path) {
    remember(port, Serving::ApiServer, pki_dir);
}

/// Registers `port` as the client port of a store serving with the store
/// certificates of the PKI in `pki_dir` (an embedded `capstan`'s).
pub fn register_store(port: u16, pki_dir: &Path) {
    remember(port, Serving::Store, pki_dir);
}

/// The PKI of the store on `port`, if it serves TLS with one.
pub fn store_pki_of(port: u16) -> Option<Pki> {
    registered(port, Serving::Store)
}

/// A client configuration for whatever serves TLS on `port`: an API
/// server (as `identity`) or a store (with its client certificate).
pub fn client_config_for(port: u16, identity: &Identity) -> Option<Arc<rustls::ClientConfig>> {
    match (pki_of(port), store_pki_of(port)) {
        (Some(pki), _) => Some(client_config(&pki, identity)),
        (None, Some(pki)) => Some(store_client_config(&pki)),
        (None, None) => None,
    }
}

/// The PKI of the server on `port`, if it serves TLS.
pub fn pki_of(port: u16) -> Option<Pki> {
    registered(port, Serving::ApiServer)
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The PEM of the admin's certificate and key.
pub fn admin(pki: &Pki) -> (String, String) {
    (read(pki.admin_cert()), read(pki.admin_key()))
}

/// A client configuration that trusts `pki`'s server CA and presents
/// the certificate `identity` names, if any.
pub fn client_config(pki: &Pki, identity: &Identity) -> Arc<rustls::ClientConfig> {
    let pair = match identity {
        Identity::Admin => Some(admin(pki)),
        Identity::Certificate { cert, key } => Some((cert.clone(), key.clone())),
        Identity::Anonymous | Identity::Token(_) => None,
    };
    trusting(&read(pki.server_ca()), pair)
}

/// A client configuration for the store of `pki` (an embedded `capstan`'s):
/// trusts the store's CA and presents the store client certificate.
pub fn store_client_config(pki: &Pki) -> Arc<rustls::ClientConfig> {
    let pair = (read(pki.store_client_cert()), read(pki.store_client_key()));
    trusting(&read(pki.store_ca()), Some(pair))
}

/// etcd-client's TLS options for the store of `pki`.
pub fn store_tls_options(pki: &Pki) -> etcd_client::TlsOptions {
    etcd_client::TlsOptions::new()
        .ca_certificate(etcd_client::Certificate::from_pem(read(pki.store_ca())))
        .identity(etcd_client::Identity::from_pem(
            read(pki.store_client_cert()),
            read(pki.store_client_key()),
        ))
}

/// Trusts the CA `ca_pem`, presenting the (certificate, key) `pair` if any.
fn trusting(ca_pem: &str, pair: Option<(String, String)>) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    let ca = CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("a CA");
    roots.add(ca).expect("trust the CA");
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots);
    let config = match pair {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .expect("a certificate");
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("a key");
            builder
                .with_client_auth_cert(chain, key)
                .expect("a client certificate")
        }
        None => builder.with_no_client_auth(),
    };
    Arc::new(config)
}

/// A kubeconfig for `https://127.0.0.1:<port>` trusting `pki`, as
/// `identity` (the admin's certificate, a token, or nobody).
pub fn kubeconfig(port: u16, pki: &Pki, identity: &Identity) -> String {
    let ca = STANDARD.encode(read(pki.server_ca()));
    let user = match identity {
        Identity::Admin => {
            let (cert, key) = admin(pki);
            certificate_user(&cert, &key)
        }
        Identity::Certificate { cert, key } => certificate_user(cert, key),
        Identity::Token(token) => format!("{{token: \"{token}\"}}"),
        Identity::Anonymous => "{}".into(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster: {{server: \"https://127.0.0.1:{port}\", certificate-authority-data: {ca}}}\n\
contexts:\n- name: t\n  context: {{cluster: t, user: t, namespace: default}}\ncurrent-context: t\nusers:\n- name: t\n  user: {user}\n"
    )
}

fn certificate_user(cert: &str, key: &str) -> String {
    format!(
        "{{client-certificate-data: {}, client-key-data: {}}}",
        STANDARD.encode(cert),
        STANDARD.encode(key)
    )
}

/// A kube-rs configuration for the server on `port` as the admin (or
/// plain HTTP if the port serves no TLS), namespace `default`.
pub fn kube_config(port: u16) -> kube::Config {
    kube_config_as(port, &Identity::Admin)
}

/// [`kube_config`] as `identity`.
pub fn kube_config_as(port: u16, identity: &Identity) -> kube::Config {
    let Some(pki) = pki_of(port) else {
        let url = format!("http://127.0.0.1:{port}").parse().expect("a URL");
        let mut config = kube::Config::new(url);
        config.default_namespace = "default".into();
        return config;
    };
    let url = format!("https://127.0.0.1:{port}").parse().expect("a URL");
    let mut config = kube::Config::new(url);
    config.default_namespace = "default".into();
    let ca = CertificateDer::from_pem_slice(read(pki.server_ca()).as_bytes()).expect("a CA");
    config.root_cert = Some(vec![ca.to_vec()]);
    let pair = match identity {
        Identity::Admin => Some(admin(&pki)),
        Identity::Certificate { cert, key } => Some((cert.clone(), key.clone())),
        Identity::Token(token) => {
            config.auth_info.token = Some(token.clone().into());
            None
        }
        Identity::Anonymous => None,
    };
    if let Some((cert, key)) = pair {
        config.auth_info.client_certificate_data = Some(STANDARD.encode(cert));
        config.auth_info.client_key_data = Some(STANDARD.encode(key).into());
    }
    config
}
