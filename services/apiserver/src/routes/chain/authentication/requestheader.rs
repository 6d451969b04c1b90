//! Requestheader authentication (kube's): a front proxy (an aggregating
//! API server calling back, or kube's own aggregator in front of this
//! one) proves itself with a client certificate signed by
//! `--requestheader-client-ca-file`, whose CN is one of
//! `--requestheader-allowed-names` when that list is set, and names the
//! user in headers: `--requestheader-username-headers` (the first with a
//! value), `--requestheader-group-headers` (every value),
//! `--requestheader-extra-headers-prefix` (`<prefix><key>`, the key
//! percent-unescaped and lower-cased). A certificate this CA did not
//! sign is left to the other authenticators.

use std::collections::BTreeMap;

use rustls_pki_types::CertificateDer;

use super::x509::X509;
use super::{Authenticated, Authenticator, Credentials, Outcome};
use crate::aggregator::headers::unescape_key;
use crate::auth::UserInfo;
use crate::error::ApiError;

pub struct RequestHeader {
    pub ca: X509,
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_prefixes: Vec<String>,
}

impl RequestHeader {
    pub fn new(
        ca: &[CertificateDer<'static>],
        settings: &crate::aggregator::settings::Settings,
    ) -> Result<RequestHeader, webpki::Error> {
        use crate::aggregator::settings::list;
        Ok(RequestHeader {
            ca: X509::new(ca)?,
            allowed_names: list(&settings.requestheader_allowed_names),
            username_headers: list(&settings.requestheader_username_headers),
            group_headers: list(&settings.requestheader_group_headers),
            extra_prefixes: list(&settings.requestheader_extra_headers_prefix),
        })
    }

    /// The user the headers name, if they name one.
    fn user_of(&self, headers: &actix_web::http::header::HeaderMap) -> Option<UserInfo> {
        let values = |name: &str| {
            let all = headers.get_all(name).filter_map(|v| v.to_str().ok());
            all.map(str::to_string).collect::<Vec<_>>()
        };
        let name = self
            .username_headers
            .iter()
            .find_map(|h| values(h).into_iter().find(|v| !v.is_empty()))?;
        let groups = self.group_headers.iter().flat_map(|h| values(h)).collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (header, value) in headers.iter() {
            let header = header.as_str();
            let prefix = self
                .extra_prefixes
                .iter()
                .find(|p| header.len() > p.len() && header[..p.len()].eq_ignore_ascii_case(p));
            if let (Some(prefix), Ok(value)) = (prefix, value.to_str()) {
                let key = unescape_key(&header[prefix.len()..]);
                extra.entry(key).or_default().push(value.to_string());
            }
        }
        Some(UserInfo {
            name,
            groups,
            extra,
            ..UserInfo::default()
        })
    }
}

impl Authenticator for RequestHeader {
    fn authenticate<'a>(&'a self, credentials: &'a Credentials<'a>) -> Outcome<'a> {
        let chain = credentials.peer_certificates;
        // Without a user header there is no one to name, whoever signed
        // the chain: the other authenticators decide, and a node's
        // heartbeat does not pay for a verification bound to fail.
        let found = match chain.is_empty() || !self.names_a_user(credentials.headers) {
            true => Ok(None),
            false => match self.ca.verify(chain) {
                // Not a front proxy: the client CA may know it.
                Err(_) => Ok(None),
                Ok(proxy) if !self.allowed(&proxy.name) => {
                    tracing::info!(name = %proxy.name, "front proxy not in --requestheader-allowed-names");
                    Err(ApiError::Unauthorized)
                }
                Ok(_) => Ok(self.user_of(credentials.headers).map(|user| Authenticated {
                    user,
                    audiences: Vec::new(),
                })),
            },
        };
        Box::pin(async move { found })
    }
}

impl RequestHeader {
    fn names_a_user(&self, headers: &actix_web::http::header::HeaderMap) -> bool {
        let named = |h: &String| headers.get_all(h).any(|v| !v.is_empty());
        self.username_headers.iter().any(named)
    }

    fn allowed(&self, name: &str) -> bool {
        self.allowed_names.is_empty() || self.allowed_names.iter().any(|n| n == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregator::settings::Settings;
    use crate::pki::Authority;
    use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
    use rustls_pki_types::pem::PemObject;
    use time::{Duration, OffsetDateTime};

    fn der(pem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        map
    }

    async fn authenticate(
        authenticator: &RequestHeader,
        chain: &[CertificateDer<'static>],
        headers: &HeaderMap,
    ) -> Result<Option<Authenticated>, ApiError> {
        let credentials = Credentials {
            headers,
            peer_certificates: chain,
            insecure: false,
            audiences: &[],
        };
        authenticator.authenticate(&credentials).await
    }

    #[actix_rt::test]
    async fn a_front_proxy_names_the_user_in_headers() {
        let ca = Authority::generate("front-proxy-ca").unwrap();
        let settings = Settings {
            requestheader_username_headers: "X-Remote-User".into(),
            requestheader_group_headers: "X-Remote-Group".into(),
            requestheader_extra_headers_prefix: "X-Remote-Extra-".into(),
            requestheader_allowed_names: "front-proxy-client".into(),
            ..Settings::default()
        };
        let authenticator = RequestHeader::new(&[der(&ca.pem)], &settings).unwrap();
        let since = OffsetDateTime::now_utc() - Duration::hours(1);
        let proxy = ca
            .issue_client("front-proxy-client", None, since, Duration::days(1))
            .unwrap();
        let chain = [der(&proxy.certificate)];
        let sent = headers(&[
            ("x-remote-user", "jane"),
            ("x-remote-group", "dev"),
            ("x-remote-group", "ops"),
            ("x-remote-extra-example.com%2fscopes", "read"),
        ]);
        let user = authenticate(&authenticator, &chain, &sent)
            .await
            .unwrap()
            .unwrap()
            .user;
        assert_eq!(user.name, "jane");
        assert_eq!(user.groups, ["dev", "ops"]);
        assert_eq!(user.extra["example.com/scopes"], ["read"]);
        let nobody = authenticate(&authenticator, &chain, &HeaderMap::new()).await;
        assert!(nobody.unwrap().is_none());
        let other = ca
            .issue_client("someone-else", None, since, Duration::days(1))
            .unwrap();
        let refused = authenticate(&authenticator, &[der(&other.certificate)], &sent).await;
        assert!(matches!(refused, Err(ApiError::Unauthorized)));
        let stranger = Authority::generate("other-ca").unwrap();
        let foreign = stranger
            .issue_client("front-proxy-client", None, since, Duration::days(1))
            .unwrap();
        let left = authenticate(&authenticator, &[der(&foreign.certificate)], &sent).await;
        assert!(left.unwrap().is_none());
    }
}
