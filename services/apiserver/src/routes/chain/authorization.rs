//! Authorization: may this user do this verb on this resource? The first
//! authorizer allows everything (kube-apiserver's AlwaysAllow mode).

use super::authentication::User;
use crate::error::ApiError;
use crate::routes::request_info::RequestInfo;

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Allow,
    /// Denied, and why.
    Deny(String),
}

/// What is asked, in the terms of Kubernetes' authorizer.Attributes.
pub struct Attributes<'a> {
    pub user: &'a User,
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub name: Option<&'a str>,
}

pub trait Authorizer: Send + Sync {
    fn authorize(&self, attributes: &Attributes) -> Decision;
}

pub struct AlwaysAllow;

impl Authorizer for AlwaysAllow {
    fn authorize(&self, _attributes: &Attributes) -> Decision {
        Decision::Allow
    }
}

/// 403 unless `authorizer` allows `user` the request.
pub fn check(authorizer: &dyn Authorizer, user: &User, info: &RequestInfo) -> Result<(), ApiError> {
    let attributes = Attributes {
        user,
        verb: info.verb.as_str(),
        group: &info.group,
        resource: &info.resource,
        subresource: info.subresource.as_deref(),
        namespace: info.namespace.as_deref(),
        name: info.name.as_deref(),
    };
    match authorizer.authorize(&attributes) {
        Decision::Allow => Ok(()),
        Decision::Deny(why) => Err(ApiError::Forbidden(format!(
            "{} \"{}\" is forbidden: User \"{}\" cannot {} resource \"{}\": {why}",
            info.resource,
            info.name.as_deref().unwrap_or(""),
            user.name,
            info.verb.as_str(),
            info.resource
        ))),
    }
}
