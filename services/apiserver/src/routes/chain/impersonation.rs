//! Impersonation: a request with `Impersonate-User` (and optionally
//! `Impersonate-Group`, `Impersonate-Uid` and `Impersonate-Extra-<key>`)
//! acts as that user, if the authorizer lets the real user `impersonate`
//! each of them, checked as kube-apiserver checks them: `users` (or
//! `serviceaccounts` in the account's namespace for
//! `system:serviceaccount:NS:NAME`) and `groups` in the core group, `uids`
//! and `userextras/<key>` in `authentication.k8s.io`.

use std::collections::BTreeMap;

use actix_web::http::header::HeaderMap;

use super::authorization;
use crate::auth::{
    self, Attributes, Authorizer, UserInfo, ANONYMOUS, AUTHENTICATED, UNAUTHENTICATED,
};
use crate::error::ApiError;
use crate::routes::request_info::RequestInfo;

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA: &str = "impersonate-extra-";
const AUTHENTICATION: &str = "authentication.k8s.io";
const SERVICE_ACCOUNT: &str = "system:serviceaccount:";

/// The user the request acts as: `user`, or the one it impersonates.
pub fn apply(
    headers: &HeaderMap,
    user: UserInfo,
    _info: &RequestInfo,
    authorizer: &dyn Authorizer,
) -> Result<UserInfo, ApiError> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .filter_map(|v| v.to_str().ok())
            .map(str::to_string)
            .collect()
    };
    let (groups, uid, extra) = (values(GROUP), values(UID), extras(headers));
    let Some(name) = values(USER).into_iter().next() else {
        if !groups.is_empty() || !uid.is_empty() || !extra.is_empty() {
            return Err(ApiError::BadRequest(
                "requested impersonation of groups, a uid or extra fields without impersonating a user"
                    .into(),
            ));
        }
        return Ok(user);
    };
    let account = name
        .strip_prefix(SERVICE_ACCOUNT)
        .and_then(|r| r.split_once(':'));
    let impersonate = |group, resource, name| {
        Attributes::for_resource(&user, "impersonate", group, resource).with_name(name)
    };
    let first = match account {
        Some((namespace, account)) => {
            impersonate("", "serviceaccounts", account).with_namespace(namespace)
        }
        None => impersonate("", "users", &name),
    };
    authorization::check(authorizer, &first)?;
    for group in &groups {
        authorization::check(authorizer, &impersonate("", "groups", group))?;
    }
    for uid in &uid {
        authorization::check(authorizer, &impersonate(AUTHENTICATION, "uids", uid))?;
    }
    for (key, values) in &extra {
        for value in values {
            let what = impersonate(AUTHENTICATION, "userextras", value).with_subresource(key);
            authorization::check(authorizer, &what)?;
        }
    }
    let groups = impersonated_groups(&name, account.map(|(ns, _)| ns), groups);
    Ok(UserInfo {
        name,
        uid: uid.into_iter().next().unwrap_or_default(),
        groups,
        extra,
    })
}

/// `Impersonate-Extra-<key>` headers, keys lower-cased and unescaped.
fn extras(headers: &HeaderMap) -> BTreeMap<String, Vec<String>> {
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        let Some(key) = name.as_str().strip_prefix(EXTRA) else {
            continue;
        };
        let key = percent_decode(key);
        if let Ok(value) = value.to_str() {
            extra.entry(key).or_default().push(value.to_string());
        }
    }
    extra
}

/// Header names carry extra keys percent-encoded (`%2F` for `/`).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = text
            .get(i + 1..i + 3)
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The groups asked for; a service account's own groups when none are;
/// and `system:authenticated` (or `system:unauthenticated` for the
/// anonymous user) as kube-apiserver adds them.
fn impersonated_groups(
    name: &str,
    account_namespace: Option<&str>,
    asked: Vec<String>,
) -> Vec<String> {
    let mut groups = asked;
    if let (Some(namespace), true) = (account_namespace, groups.is_empty()) {
        groups = auth::service_account_groups(namespace);
    }
    let implied = match name == ANONYMOUS {
        true => UNAUTHENTICATED,
        false => AUTHENTICATED,
    };
    if !groups.iter().any(|g| g == implied) {
        groups.push(implied.to_string());
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{AlwaysAllow, Decision};
    use actix_web::http::header::{HeaderName, HeaderValue};
    use actix_web::http::Method;
    use std::sync::Mutex;

    /// Allows everything but impersonating `root`, and remembers what it
    /// was asked.
    #[derive(Default)]
    struct NoRoot(Mutex<Vec<String>>);

    impl Authorizer for NoRoot {
        fn authorize(&self, a: &Attributes) -> Decision {
            let asked = format!(
                "{} {}/{}/{} {} {}",
                a.verb, a.group, a.resource, a.subresource, a.namespace, a.name
            );
            self.0.lock().unwrap().push(asked);
            match (a.verb, a.name) {
                ("impersonate", "root") => Decision::Deny("no".into()),
                _ => Decision::Allow,
            }
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            let value = HeaderValue::from_str(value).unwrap();
            headers.append(HeaderName::from_static(name), value);
        }
        headers
    }

    fn info() -> RequestInfo {
        RequestInfo::parse(&Method::GET, "/api/v1/pods", false).unwrap()
    }

    #[test]
    fn an_allowed_impersonation_changes_the_user_and_a_denied_one_is_forbidden() {
        let admin = UserInfo::named("admin", &["system:masters"]);
        let same = apply(&HeaderMap::new(), admin.clone(), &info(), &AlwaysAllow).unwrap();
        assert_eq!(same, admin);
        let no_root = NoRoot::default();
        let asked = headers(&[
            (USER, "alice"),
            (GROUP, "dev"),
            (UID, "42"),
            ("impersonate-extra-scopes%2fa", "x"),
        ]);
        let alice = apply(&asked, admin.clone(), &info(), &no_root).unwrap();
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.uid, "42");
        assert_eq!(alice.groups, vec!["dev", AUTHENTICATED]);
        assert_eq!(alice.extra["scopes/a"], vec!["x"]);
        assert_eq!(
            *no_root.0.lock().unwrap(),
            vec![
                "impersonate /users/  alice",
                "impersonate /groups/  dev",
                "impersonate authentication.k8s.io/uids/  42",
                "impersonate authentication.k8s.io/userextras/scopes/a  x",
            ]
        );
        let root = apply(&headers(&[(USER, "root")]), admin, &info(), &no_root);
        assert!(matches!(root, Err(ApiError::Forbidden(_))), "{root:?}");
    }

    #[test]
    fn a_service_account_is_impersonated_in_its_namespace_with_its_groups() {
        let no_root = NoRoot::default();
        let asked = headers(&[(USER, "system:serviceaccount:team:robot")]);
        let robot = apply(&asked, UserInfo::anonymous(), &info(), &no_root).unwrap();
        assert_eq!(
            robot.groups,
            vec![
                "system:serviceaccounts",
                "system:serviceaccounts:team",
                AUTHENTICATED
            ]
        );
        assert_eq!(
            *no_root.0.lock().unwrap(),
            vec!["impersonate /serviceaccounts/ team robot"]
        );
        let groups_alone = apply(
            &headers(&[(GROUP, "dev")]),
            UserInfo::anonymous(),
            &info(),
            &no_root,
        );
        assert!(matches!(groups_alone, Err(ApiError::BadRequest(_))));
    }
}
