//! Authentication: who sent the request. The first authenticator lets
//! everyone in as the anonymous user, as kube-apiserver does with
//! `--anonymous-auth` and no other authenticator.

use actix_web::http::header::HeaderMap;

use crate::error::ApiError;

/// The user a request acts as (Kubernetes' user.Info).
#[derive(Debug, Clone, PartialEq)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
}

impl User {
    pub fn anonymous() -> User {
        User {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
        }
    }
}

pub trait Authenticator: Send + Sync {
    /// The request's user, or `Unauthorized` when its credentials are bad.
    fn authenticate(&self, headers: &HeaderMap) -> Result<User, ApiError>;
}

pub struct Anonymous;

impl Authenticator for Anonymous {
    fn authenticate(&self, _headers: &HeaderMap) -> Result<User, ApiError> {
        Ok(User::anonymous())
    }
}
