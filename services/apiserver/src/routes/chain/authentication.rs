//! Authentication: who sent the request. Authenticators are combined as
//! kube-apiserver's union: the first that recognises good credentials
//! names the user; credentials that some authenticator refuses and none
//! accepts are a 401; a request with no credentials at all is
//! `system:anonymous` when `--anonymous-auth` is on, else a 401. Every
//! authenticated user is also in `system:authenticated`.
//!
//! The authenticators: [`x509`] (client certificates signed by the client
//! CA), [`service_account`] (signed service-account tokens),
//! [`Insecure`] (the loopback-only plain HTTP port, if one is served).

pub mod requestheader;
pub mod service_account;
pub mod x509;

use std::sync::Arc;

use actix_web::http::header::HeaderMap;
use futures::future::BoxFuture;
use rustls_pki_types::CertificateDer;

use crate::auth::{UserInfo, AUTHENTICATED, MASTERS};
use crate::error::ApiError;

/// What a request offers to prove who sent it.
pub struct Credentials<'a> {
    pub headers: &'a HeaderMap,
    /// The TLS client certificate chain, leaf first; empty when the
    /// client sent none or the connection is plain HTTP.
    pub peer_certificates: &'a [CertificateDer<'static>],
    /// The connection is the loopback-only plain HTTP port.
    pub insecure: bool,
    /// The audiences a token must be for: the server's `--api-audiences`,
    /// or those a TokenReview names.
    pub audiences: &'a [String],
}

impl Credentials<'_> {
    /// The bearer token of the `Authorization` header, if any.
    pub fn bearer(&self) -> Option<&str> {
        let value = self.headers.get("authorization")?.to_str().ok()?;
        let (scheme, token) = value.split_once(' ')?;
        let token = token.trim();
        (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
    }
}

/// A recognised user, and the audiences its credentials were for (those
/// of the request that the token named; empty for certificates).
#[derive(Debug, Clone, PartialEq)]
pub struct Authenticated {
    pub user: UserInfo,
    pub audiences: Vec<String>,
}

pub type Outcome<'a> = BoxFuture<'a, Result<Option<Authenticated>, ApiError>>;

pub trait Authenticator: Send + Sync {
    /// `Ok(Some)` for good credentials of this authenticator's kind,
    /// `Ok(None)` when the request carries none of its kind, and
    /// `Err(ApiError::Unauthorized)` when they are bad.
    fn authenticate<'a>(&'a self, credentials: &'a Credentials<'a>) -> Outcome<'a>;
}

/// Everyone is anonymous (no authenticator at all).
pub struct Anonymous;

impl Authenticator for Anonymous {
    fn authenticate<'a>(&'a self, _credentials: &'a Credentials<'a>) -> Outcome<'a> {
        Box::pin(async {
            Ok(Some(Authenticated {
                user: UserInfo::anonymous(),
                audiences: Vec::new(),
            }))
        })
    }
}

/// Whoever reaches the loopback-only plain HTTP port is a superuser, as
/// kube-apiserver's insecure port was.
pub struct Insecure;

impl Authenticator for Insecure {
    fn authenticate<'a>(&'a self, credentials: &'a Credentials<'a>) -> Outcome<'a> {
        let user = credentials.insecure.then(|| Authenticated {
            user: UserInfo::named("system:unsecured", &[MASTERS]),
            audiences: Vec::new(),
        });
        Box::pin(async move { Ok(user) })
    }
}

/// kube-apiserver's union of authenticators, with anonymous requests
/// allowed or not.
pub struct Union {
    pub authenticators: Vec<Arc<dyn Authenticator>>,
    pub anonymous: bool,
}

impl Authenticator for Union {
    fn authenticate<'a>(&'a self, credentials: &'a Credentials<'a>) -> Outcome<'a> {
        Box::pin(async move {
            let mut refused = false;
            for authenticator in &self.authenticators {
                match authenticator.authenticate(credentials).await {
                    Ok(Some(mut found)) => {
                        if !found.user.groups.iter().any(|g| g == AUTHENTICATED) {
                            found.user.groups.push(AUTHENTICATED.into());
                        }
                        return Ok(Some(found));
                    }
                    Ok(None) => {}
                    Err(err) => {
                        tracing::debug!(%err, "credentials refused");
                        refused = true;
                    }
                }
            }
            // A bearer token nobody recognises is refused, as kube-apiserver
            // refuses it, rather than ignored into anonymity.
            let unknown_token = credentials.bearer().is_some();
            match refused || unknown_token || !self.anonymous {
                true => Err(ApiError::Unauthorized),
                false => Ok(Some(Authenticated {
                    user: UserInfo::anonymous(),
                    audiences: Vec::new(),
                })),
            }
        })
    }
}

/// The request's user through `authenticator`: a 401 unless someone.
pub async fn user_of(
    authenticator: &dyn Authenticator,
    credentials: &Credentials<'_>,
) -> Result<UserInfo, ApiError> {
    match authenticator.authenticate(credentials).await? {
        Some(found) => Ok(found.user),
        None => Err(ApiError::Unauthorized),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Knows one token.
    struct OneToken;

    impl Authenticator for OneToken {
        fn authenticate<'a>(&'a self, credentials: &'a Credentials<'a>) -> Outcome<'a> {
            let found = match credentials.bearer() {
                None => Ok(None),
                Some("good") => Ok(Some(Authenticated {
                    user: UserInfo::named("alice", &["dev"]),
                    audiences: Vec::new(),
                })),
                Some(_) => Err(ApiError::Unauthorized),
            };
            Box::pin(async move { found })
        }
    }

    fn with_token(token: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(token) = token {
            let value = format!("Bearer {token}").parse().unwrap();
            headers.insert(actix_web::http::header::AUTHORIZATION, value);
        }
        headers
    }

    async fn who(anonymous: bool, token: Option<&str>) -> Result<UserInfo, ApiError> {
        let union = Union {
            authenticators: vec![Arc::new(OneToken)],
            anonymous,
        };
        let headers = with_token(token);
        let credentials = Credentials {
            headers: &headers,
            peer_certificates: &[],
            insecure: false,
            audiences: &[],
        };
        user_of(&union, &credentials).await
    }

    #[actix_rt::test]
    async fn the_union_names_the_user_refuses_bad_credentials_and_lets_nobody_in_as_anonymous() {
        let alice = who(true, Some("good")).await.unwrap();
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.groups, vec!["dev", AUTHENTICATED]);
        assert!(matches!(
            who(true, Some("bad")).await,
            Err(ApiError::Unauthorized)
        ));
        assert_eq!(who(true, None).await.unwrap(), UserInfo::anonymous());
        assert!(matches!(
            who(false, None).await,
            Err(ApiError::Unauthorized)
        ));
    }
}
