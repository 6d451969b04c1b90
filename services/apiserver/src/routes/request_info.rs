//! Decoding a resource URL into a request description, as apiserver's
//! RequestInfoFactory does.

use actix_web::http::Method;

use crate::error::ApiError;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RequestInfo {
    pub verb: Verb,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl RequestInfo {
    /// The request's description, from its method, path and `watch` query.
    pub fn from_request(
        req: &actix_web::HttpRequest,
        query: &crate::registry::options::Query,
    ) -> Result<RequestInfo, ApiError> {
        let watch = matches!(query.get("watch").map(String::as_str), Some("true" | "1"));
        let mut info = RequestInfo::parse(req.method(), req.path(), watch)?;
        info.name_from_selector(query);
        Ok(info)
    }

    /// As kube: a list or watch whose field selector pins `metadata.name`
    /// is a request for that one object, so authorizers see its name (a
    /// Role's `resourceNames` can allow it) and the handler serves no
    /// other. A selector that does not parse names nothing (the list
    /// refuses it).
    fn name_from_selector(&mut self, query: &crate::registry::options::Query) {
        if self.name.is_some() || !matches!(self.verb, Verb::List | Verb::Watch) {
            return;
        }
        let Some(text) = query.get("fieldSelector") else {
            return;
        };
        let selector = crate::object::selector::FieldSelector::parse(text).ok();
        let name = selector.as_ref().and_then(|s| s.exact_name());
        if let Some(name) =
            name.filter(|n| !n.is_empty() && crate::object::meta::is_path_segment(n))
        {
            self.name = Some(name.to_string());
        }
    }

    pub fn parse(method: &Method, path: &str, watch: bool) -> Result<RequestInfo, ApiError> {
        let parts: Vec<&str> = path
            .trim_matches('/')
            .split('/')
            .filter(|p| !p.is_empty())
            .collect();
        let (group, version, rest) = match parts.as_slice() {
            ["api", version, rest @ ..] => ("", *version, rest),
            ["apis", group, version, rest @ ..] => (*group, *version, rest),
            _ => return Err(ApiError::UnknownPath),
        };
        let (namespace, rest) = match rest {
            // `namespaces/<ns>/status|finalize` address the namespace itself.
            ["namespaces", ns, sub, ..] if !matches!(*sub, "status" | "finalize") => {
                (Some(ns.to_string()), &rest[2..])
            }
            _ => (None, rest),
        };
        let (resource, name, subresource) = match rest {
            [resource] => (*resource, None, None),
            [resource, name] => (*resource, Some(name.to_string()), None),
            [resource, name, sub] => (*resource, Some(name.to_string()), Some(sub.to_string())),
            _ => return Err(ApiError::UnknownPath),
        };
        let verb = verb_of(method, name.is_some(), subresource.is_some(), watch)?;
        Ok(RequestInfo {
            verb,
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            subresource,
            namespace,
            name,
        })
    }
}

/// A POST to a named object's subresource (`pods/<name>/binding`) is a
/// create of that subresource.
fn verb_of(method: &Method, named: bool, sub: bool, watch: bool) -> Result<Verb, ApiError> {
    Ok(match (method.as_str(), named) {
        ("POST", true) if sub => Verb::Create,
        ("GET", true) if watch => Verb::Watch,
        ("GET", true) => Verb::Get,
        ("GET", false) if watch => Verb::Watch,
        ("GET", false) => Verb::List,
        ("POST", false) => Verb::Create,
        ("PUT", true) => Verb::Update,
        ("PATCH", true) => Verb::Patch,
        ("DELETE", true) => Verb::Delete,
        ("DELETE", false) => Verb::DeleteCollection,
        _ => return Err(ApiError::MethodNotAllowed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_decode_like_kubernetes() {
        let info = RequestInfo::parse(&Method::GET, "/api/v1/namespaces/ns1/pods/p/status", false)
            .unwrap();
        assert_eq!(
            (
                info.namespace.as_deref(),
                info.resource.as_str(),
                info.name.as_deref(),
                info.subresource.as_deref()
            ),
            (Some("ns1"), "pods", Some("p"), Some("status"))
        );
        let info = RequestInfo::parse(&Method::GET, "/api/v1/namespaces/ns1", false).unwrap();
        assert_eq!(
            (info.resource.as_str(), info.name.as_deref(), info.verb),
            ("namespaces", Some("ns1"), Verb::Get)
        );
        let info =
            RequestInfo::parse(&Method::PUT, "/api/v1/namespaces/ns1/finalize", false).unwrap();
        assert_eq!(info.subresource.as_deref(), Some("finalize"));
        let info = RequestInfo::parse(&Method::GET, "/apis/apps/v1/deployments", true).unwrap();
        assert_eq!(
            (info.group.as_str(), info.verb, info.namespace),
            ("apps", Verb::Watch, None)
        );
        assert!(RequestInfo::parse(&Method::POST, "/api/v1/namespaces/a/pods/x", false).is_err());
    }
}
