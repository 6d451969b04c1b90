//! Client certificates: a chain that the client CA signed, valid now and
//! for client authentication, names the user by its subject's CN and the
//! groups by its O values (kube-apiserver's x509 authenticator). The TLS
//! handshake only proved the client holds the certificate's key (see
//! `serving::tls`); the trust decision is made here, so a bad certificate
//! is a 401. A chain that verified is remembered (`verified.rs`).

mod verified;

use std::time::SystemTime;

use rustls_pki_types::{CertificateDer, TrustAnchor, UnixTime};
use webpki::{EndEntityCert, KeyUsage};
use x509_parser::prelude::FromDer;

use super::{Authenticated, Authenticator, Credentials, Outcome};
use crate::auth::UserInfo;
use crate::error::ApiError;

pub struct X509 {
    anchors: Vec<TrustAnchor<'static>>,
    verified: verified::VerifiedChains,
}

impl X509 {
    /// Trusts the CAs of `client_ca` (the certificates of
    /// `--client-ca-file`).
    pub fn new(client_ca: &[CertificateDer<'static>]) -> Result<X509, webpki::Error> {
        let anchors = client_ca
            .iter()
            .map(|ca| webpki::anchor_from_trusted_cert(ca).map(|a| a.to_owned()))
            .collect::<Result<_, _>>()?;
        Ok(X509 {
            anchors,
            verified: verified::VerifiedChains::default(),
        })
    }

    /// The user of a verified chain, or why it is refused.
    pub(super) fn verify(&self, chain: &[CertificateDer<'static>]) -> Result<UserInfo, String> {
        let now = SystemTime::now();
        if let Some(user) = self.verified.get(chain, now) {
            return Ok(user);
        }
        let user = self.check_chain(chain, now)?;
        self.verified.insert(chain, &user, now);
        Ok(user)
    }

    fn check_chain(
        &self,
        chain: &[CertificateDer<'static>],
        now: SystemTime,
    ) -> Result<UserInfo, String> {
        let since_epoch = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let leaf = EndEntityCert::try_from(&chain[0]).map_err(|e| e.to_string())?;
        leaf.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &self.anchors,
            &chain[1..],
            UnixTime::since_unix_epoch(since_epoch),
            KeyUsage::client_auth(),
            None,
            None,
        )
        .map_err(|e| format!("x509: {e:?}"))?;
        subject_user(&chain[0])
    }
}

/// CN as the user name, O values as groups.
fn subject_user(cert: &CertificateDer<'_>) -> Result<UserInfo, String> {
    let (_, parsed) =
        x509_parser::certificate::X509Certificate::from_der(cert).map_err(|e| e.to_string())?;
    let subject = parsed.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .filter(|cn| !cn.is_empty())
        .ok_or("x509: the certificate has no common name")?;
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .map(str::to_string)
        .collect();
    Ok(UserInfo {
        name: name.to_string(),
        groups,
        ..UserInfo::default()
    })
}

impl Authenticator for X509 {
    fn authenticate<'a>(&'a self, credentials: &'a Credentials<'a>) -> Outcome<'a> {
        let chain = credentials.peer_certificates;
        let found = match chain.is_empty() {
            true => Ok(None),
            false => match self.verify(chain) {
                Ok(user) => Ok(Some(Authenticated {
                    user,
                    audiences: Vec::new(),
                })),
                Err(why) => {
                    tracing::info!(%why, "client certificate refused");
                    Err(ApiError::Unauthorized)
                }
            },
        };
        Box::pin(async move { found })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::Authority;
    use rustls_pki_types::pem::PemObject;
    use time::{Duration, OffsetDateTime};

    fn der(pem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
    }

    #[test]
    fn a_certificate_of_the_client_ca_names_the_user_and_others_are_refused() {
        let ca = Authority::generate("client-ca").unwrap();
        let stranger = Authority::generate("client-ca").unwrap();
        let x509 = X509::new(&[der(&ca.pem)]).unwrap();
        let an_hour_ago = OffsetDateTime::now_utc() - Duration::hours(1);
        let jane = ca
            .issue_client("jane", Some("dev"), an_hour_ago, Duration::days(1))
            .unwrap();
        let user = x509.verify(&[der(&jane.certificate)]).unwrap();
        assert_eq!(
            (user.name.as_str(), user.groups.clone()),
            ("jane", vec!["dev".to_string()])
        );
        let expired = ca
            .issue_client(
                "jane",
                None,
                an_hour_ago - Duration::days(2),
                Duration::days(1),
            )
            .unwrap();
        let refused = x509.verify(&[der(&expired.certificate)]).unwrap_err();
        assert!(refused.contains("Expired"), "{refused}");
        // The good chain is remembered (and answers the same), refusals not.
        assert_eq!(x509.verified.len(), 1);
        assert_eq!(x509.verify(&[der(&jane.certificate)]).unwrap(), user);
        let untrusted = stranger
            .issue_client("jane", None, an_hour_ago, Duration::days(1))
            .unwrap();
        assert!(x509.verify(&[der(&untrusted.certificate)]).is_err());
    }
}
