//! Who is calling the process's HTTPS listener, as a kubelet and an
//! aggregated API server (metrics-server) tell: a client certificate the
//! cluster's client CA signed names the user (CN) and groups (O); the API
//! server's front proxy (a certificate the request-header CA signed, with
//! an allowed name) names the user in `X-Remote-*` headers; anyone else
//! is anonymous. The CAs and header names come from the API server's
//! `kube-system/extension-apiserver-authentication` ConfigMap (delegated
//! authentication), or `--client-ca-file`.

use std::path::Path;
use std::sync::Arc;

use axum::http::HeaderMap;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;

use crate::error::Error;

const CONFIGMAP: &str = "extension-apiserver-authentication";

/// The caller of one request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Caller {
    pub user: String,
    pub groups: Vec<String>,
}

impl Caller {
    fn anonymous() -> Caller {
        Caller {
            user: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
        }
    }
}

/// What a connection's client certificate made of it.
#[derive(Debug, Clone)]
pub enum Peer {
    Anonymous,
    User(Caller),
    /// The API server's front proxy: the request's headers name the user.
    FrontProxy,
}

struct FrontProxy {
    verifier: Arc<dyn ClientCertVerifier>,
    allowed_names: Vec<String>,
    user_headers: Vec<String>,
    group_headers: Vec<String>,
}

/// The trusted CAs and the request-header settings.
pub struct Authentication {
    client_ca: Option<(RootCertStore, Arc<dyn ClientCertVerifier>)>,
    front_proxy: Option<(RootCertStore, FrontProxy)>,
}

fn roots(pem: &str) -> Option<RootCertStore> {
    let mut store = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem.as_bytes()).flatten() {
        let _ = store.add(cert);
    }
    (!store.is_empty()).then_some(store)
}

fn verifier(store: &RootCertStore) -> Result<Arc<dyn ClientCertVerifier>, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    WebPkiClientVerifier::builder_with_provider(Arc::new(store.clone()), provider)
        .build()
        .map_err(|e| Error::Tls(format!("client certificate verifier: {e}")))
}

fn json_list(text: Option<&String>) -> Vec<String> {
    text.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default()
}

impl Authentication {
    /// Reads the API server's settings (and `client_ca_file`, which wins).
    pub async fn load(
        client: &kube::Client,
        client_ca_file: Option<&Path>,
    ) -> Result<Authentication, Error> {
        let configmap = Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
            .get_opt(CONFIGMAP)
            .await
            .map_err(Error::api(format!("read kube-system/{CONFIGMAP}")))?;
        let data = configmap.and_then(|c| c.data).unwrap_or_default();
        let client_ca_pem = match client_ca_file {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| Error::Tls(format!("{}: {e}", path.display())))?,
            ),
            None => data.get("client-ca-file").cloned(),
        };
        let client_ca = match client_ca_pem.as_deref().and_then(roots) {
            Some(store) => Some((store.clone(), verifier(&store)?)),
            None => None,
        };
        let front_proxy = match data
            .get("requestheader-client-ca-file")
            .and_then(|p| roots(p))
        {
            Some(store) => Some((
                store.clone(),
                FrontProxy {
                    verifier: verifier(&store)?,
                    allowed_names: json_list(data.get("requestheader-allowed-names")),
                    user_headers: json_list(data.get("requestheader-username-headers")),
                    group_headers: json_list(data.get("requestheader-group-headers")),
                },
            )),
            None => None,
        };
        if client_ca.is_none() {
            tracing::warn!(
                "no client CA known: every caller of the kubelet and metrics APIs is anonymous"
            );
        }
        Ok(Authentication {
            client_ca,
            front_proxy,
        })
    }

    /// The TLS layer's verifier: any certificate either CA signed, or none.
    pub fn tls_verifier(&self) -> Result<Arc<dyn ClientCertVerifier>, Error> {
        let mut all = RootCertStore::empty();
        for (store, _) in self.client_ca.iter() {
            all.extend(store.roots.iter().cloned());
        }
        for (store, _) in self.front_proxy.iter() {
            all.extend(store.roots.iter().cloned());
        }
        if all.is_empty() {
            return Ok(WebPkiClientVerifier::no_client_auth());
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        WebPkiClientVerifier::builder_with_provider(Arc::new(all), provider)
            .allow_unauthenticated()
            .build()
            .map_err(|e| Error::Tls(format!("client certificate verifier: {e}")))
    }

    /// Classifies a connection by the certificates its client sent.
    pub fn peer(&self, certs: Option<&[CertificateDer<'static>]>) -> Peer {
        let Some((end, intermediates)) = certs.and_then(|c| c.split_first()) else {
            return Peer::Anonymous;
        };
        let now = UnixTime::now();
        let Some(names) = subject(end) else {
            return Peer::Anonymous;
        };
        if let Some((_, proxy)) = &self.front_proxy {
            let signed = proxy
                .verifier
                .verify_client_cert(end, intermediates, now)
                .is_ok();
            let allowed =
                proxy.allowed_names.is_empty() || proxy.allowed_names.contains(&names.user);
            if signed && allowed {
                return Peer::FrontProxy;
            }
        }
        if let Some((_, verifier)) = &self.client_ca {
            if verifier.verify_client_cert(end, intermediates, now).is_ok() {
                return Peer::User(names);
            }
        }
        Peer::Anonymous
    }

    /// The caller of a request on a connection of `peer`.
    pub fn caller(&self, peer: &Peer, headers: &HeaderMap) -> Caller {
        match (peer, &self.front_proxy) {
            (Peer::User(caller), _) => caller.clone(),
            (Peer::FrontProxy, Some((_, proxy))) => {
                let values = |names: &[String]| -> Vec<String> {
                    names
                        .iter()
                        .flat_map(|n| headers.get_all(n.as_str()).iter())
                        .filter_map(|v| v.to_str().ok().map(str::to_string))
                        .collect()
                };
                match values(&proxy.user_headers).into_iter().next() {
                    Some(user) => Caller {
                        user,
                        groups: values(&proxy.group_headers),
                    },
                    None => Caller::anonymous(),
                }
            }
            _ => Caller::anonymous(),
        }
    }
}

/// The user (CN) and groups (O) a certificate names.
fn subject(cert: &CertificateDer<'_>) -> Option<Caller> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert).ok()?;
    let subject = parsed.subject();
    let user = subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    Some(Caller { user, groups })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, Certificate, CertificateParams, DnType, IsCa, KeyPair};

    struct Ca {
        pem: String,
        cert: Certificate,
        key: KeyPair,
    }

    fn ca(name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).unwrap();
        Ca {
            pem: cert.pem(),
            cert,
            key,
        }
    }

    fn client(ca: &Ca, user: &str, group: &str) -> Vec<CertificateDer<'static>> {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, user);
        params
            .distinguished_name
            .push(DnType::OrganizationName, group);
        vec![params
            .signed_by(&key, &ca.cert, &ca.key)
            .unwrap()
            .der()
            .clone()]
    }

    fn authentication(client_ca: &Ca, front_proxy_ca: &Ca) -> Authentication {
        let store = roots(&client_ca.pem).unwrap();
        let proxy_store = roots(&front_proxy_ca.pem).unwrap();
        Authentication {
            client_ca: Some((store.clone(), verifier(&store).unwrap())),
            front_proxy: Some((
                proxy_store.clone(),
                FrontProxy {
                    verifier: verifier(&proxy_store).unwrap(),
                    allowed_names: vec!["front-proxy-client".into()],
                    user_headers: vec!["X-Remote-User".into()],
                    group_headers: vec!["X-Remote-Group".into()],
                },
            )),
        }
    }

    #[test]
    fn callers_are_told_apart_by_who_signed_their_certificate() {
        let (clients, proxies, stranger) = (ca("clients"), ca("front-proxy"), ca("stranger"));
        let auth = authentication(&clients, &proxies);
        let mut headers = HeaderMap::new();
        headers.insert("X-Remote-User", "jane".parse().unwrap());
        headers.insert("X-Remote-Group", "dev".parse().unwrap());

        let admin = auth.peer(Some(&client(&clients, "admin", "system:masters")));
        let expected = Caller {
            user: "admin".into(),
            groups: vec!["system:masters".into()],
        };
        assert_eq!(
            auth.caller(&admin, &headers),
            expected,
            "headers are ignored from a plain client"
        );

        let proxy = auth.peer(Some(&client(&proxies, "front-proxy-client", "")));
        assert!(matches!(proxy, Peer::FrontProxy));
        let jane = Caller {
            user: "jane".into(),
            groups: vec!["dev".into()],
        };
        assert_eq!(auth.caller(&proxy, &headers), jane);

        let wrong_name = auth.peer(Some(&client(&proxies, "someone-else", "")));
        assert!(matches!(wrong_name, Peer::Anonymous));
        assert!(matches!(
            auth.peer(Some(&client(&stranger, "admin", "system:masters"))),
            Peer::Anonymous
        ));
        assert_eq!(auth.caller(&auth.peer(None), &headers), Caller::anonymous());
    }
}
