//! The authorization step: the request's attributes (see [`crate::auth`])
//! asked of the `--authorization-mode` union. A request nobody allows is
//! a 403 whose message has kube-apiserver's form.

use crate::auth::{Attributes, Authorizer, Decision, UserInfo};
use crate::error::ApiError;
use crate::object::selector::{FieldSelector, LabelSelector};
use crate::registry::options::Query;
use crate::routes::request_info::{RequestInfo, Verb};

/// The selectors a list, watch or deletecollection names, when they
/// parse (as kube, authorizers see them; one that does not parse narrows
/// nothing, and the list itself refuses it).
#[derive(Debug, Default)]
pub struct Selectors {
    fields: Option<FieldSelector>,
    labels: Option<LabelSelector>,
}

impl Selectors {
    pub fn of(info: &RequestInfo, query: &Query) -> Selectors {
        if !matches!(info.verb, Verb::List | Verb::Watch | Verb::DeleteCollection) {
            return Selectors::default();
        }
        let named = |key: &str| query.get(key).filter(|s| !s.is_empty());
        Selectors {
            fields: named("fieldSelector").and_then(|s| FieldSelector::parse(s).ok()),
            labels: named("labelSelector").and_then(|s| LabelSelector::parse(s).ok()),
        }
    }
}

/// The attributes of a resource request described by `info`, for `path`.
pub fn attributes<'a>(
    user: &'a UserInfo,
    info: &'a RequestInfo,
    path: &'a str,
    selectors: &'a Selectors,
) -> Attributes<'a> {
    Attributes {
        namespace: info.namespace.as_deref().unwrap_or(""),
        subresource: info.subresource.as_deref().unwrap_or(""),
        name: info.name.as_deref().unwrap_or(""),
        path,
        field_selector: selectors.fields.as_ref(),
        label_selector: selectors.labels.as_ref(),
        ..Attributes::for_resource(user, info.verb.as_str(), &info.group, &info.resource)
    }
}

/// 403 unless `authorizer` allows the request.
pub fn check(authorizer: &dyn Authorizer, attributes: &Attributes) -> Result<(), ApiError> {
    match authorizer.authorize(attributes) {
        Decision::Allow => Ok(()),
        Decision::Deny(reason) | Decision::NoOpinion(reason) => {
            Err(ApiError::Forbidden(attributes.forbidden(&reason)))
        }
    }
}
