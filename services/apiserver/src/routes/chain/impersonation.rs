//! Impersonation: a request with `Impersonate-User` (and optionally
//! `Impersonate-Group`) acts as that user, if the authorizer lets the
//! real user `impersonate` users (and groups).

use actix_web::http::header::HeaderMap;

use super::authentication::User;
use super::authorization::{self, Attributes, Authorizer};
use crate::error::ApiError;
use crate::routes::request_info::RequestInfo;

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";

/// The user the request acts as: `user`, or the one it impersonates.
pub fn apply(
    headers: &HeaderMap,
    user: User,
    _info: &RequestInfo,
    authorizer: &dyn Authorizer,
) -> Result<User, ApiError> {
    let Some(name) = headers.get(USER).and_then(|v| v.to_str().ok()) else {
        return Ok(user);
    };
    let groups: Vec<String> = headers
        .get_all(GROUP)
        .filter_map(|v| v.to_str().ok())
        .map(str::to_string)
        .collect();
    allowed(authorizer, &user, "users", name)?;
    for group in &groups {
        allowed(authorizer, &user, "groups", group)?;
    }
    let mut groups = groups;
    if groups.is_empty() {
        groups.push("system:authenticated".into());
    }
    Ok(User {
        name: name.to_string(),
        groups,
    })
}

fn allowed(
    authorizer: &dyn Authorizer,
    user: &User,
    resource: &str,
    name: &str,
) -> Result<(), ApiError> {
    let attributes = Attributes {
        user,
        verb: "impersonate",
        group: "",
        resource,
        subresource: None,
        namespace: None,
        name: Some(name),
        path: None,
    };
    authorization::check(authorizer, &attributes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::chain::authorization::AlwaysAllow;
    use crate::routes::chain::authorization::Decision;
    use actix_web::http::header::{HeaderName, HeaderValue};
    use actix_web::http::Method;

    /// Allows everything but impersonating `root`.
    struct NoRoot;

    impl Authorizer for NoRoot {
        fn authorize(&self, attributes: &Attributes) -> Decision {
            match (attributes.verb, attributes.name) {
                ("impersonate", Some("root")) => Decision::Deny("no".into()),
                _ => Decision::Allow,
            }
        }
    }

    fn headers(user: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let value = HeaderValue::from_str(user).unwrap();
        headers.insert(HeaderName::from_static(USER), value);
        headers
    }

    #[test]
    fn an_allowed_impersonation_changes_the_user_and_a_denied_one_is_forbidden() {
        let info = RequestInfo::parse(&Method::GET, "/api/v1/pods", false).unwrap();
        let anonymous = User::anonymous();
        let same = apply(&HeaderMap::new(), anonymous.clone(), &info, &AlwaysAllow).unwrap();
        assert_eq!(same, anonymous);
        let alice = apply(&headers("alice"), anonymous.clone(), &info, &NoRoot).unwrap();
        assert_eq!(alice.name, "alice");
        let root = apply(&headers("root"), anonymous, &info, &NoRoot);
        assert!(matches!(root, Err(ApiError::Forbidden(_))), "{root:?}");
    }
}
