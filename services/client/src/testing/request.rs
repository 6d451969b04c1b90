//! A REST request decoded: verb, group/version/resource, namespace,
//! name, subresource, query options, and who sent it.

use std::collections::HashMap;

use http::{Method, Request};

/// The Kubernetes verbs the in-memory API answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch=true`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
}

/// One request, decoded.
#[derive(Clone, Debug)]
pub(super) struct ApiRequest {
    pub verb: Verb,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub query: HashMap<String, String>,
    pub content_type: String,
    pub user: Option<String>,
    pub groups: Vec<String>,
    pub user_agent: Option<String>,
}

impl ApiRequest {
    /// Decodes the head of `request`; `None` for a path that is not a
    /// resource path.
    pub fn parse<B>(request: &Request<B>) -> Option<ApiRequest> {
        let query = parse_query(request.uri().query().unwrap_or_default());
        let segments: Vec<&str> = request
            .uri()
            .path()
            .split('/')
            .filter(|s| !s.is_empty())
            .collect();
        let (group, version, rest) = match segments.as_slice() {
            ["api", version, rest @ ..] => (String::new(), version.to_string(), rest),
            ["apis", group, version, rest @ ..] => (group.to_string(), version.to_string(), rest),
            _ => return None,
        };
        let (namespace, rest) = match rest {
            ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
            _ => (None, rest),
        };
        let (resource, name, subresource) = match rest {
            [resource] => (resource, None, None),
            [resource, name] => (resource, Some(name.to_string()), None),
            [resource, name, sub] => (resource, Some(name.to_string()), Some(sub.to_string())),
            _ => return None,
        };
        let watching = matches!(query.get("watch").map(String::as_str), Some("true" | "1"));
        let verb = match (request.method(), name.is_some()) {
            (&Method::GET, true) => Verb::Get,
            (&Method::GET, false) if watching => Verb::Watch,
            (&Method::GET, false) => Verb::List,
            (&Method::POST, _) => Verb::Create,
            (&Method::PUT, _) => Verb::Update,
            (&Method::PATCH, _) => Verb::Patch,
            (&Method::DELETE, true) => Verb::Delete,
            (&Method::DELETE, false) => Verb::DeleteCollection,
            _ => return None,
        };
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        Some(ApiRequest {
            verb,
            group,
            version,
            resource: resource.to_string(),
            subresource,
            namespace,
            name,
            query,
            content_type: header("content-type").unwrap_or_default(),
            user: header("impersonate-user"),
            groups: request
                .headers()
                .get_all("impersonate-group")
                .iter()
                .filter_map(|v| v.to_str().ok().map(str::to_string))
                .collect(),
            user_agent: header("user-agent"),
        })
    }

    /// `resource` or `resource/subresource`.
    pub fn resource_path(&self) -> String {
        match &self.subresource {
            Some(sub) => format!("{}/{sub}", self.resource),
            None => self.resource.clone(),
        }
    }

    /// `resource.group` as kube names it in messages (`deployments.apps`).
    pub fn qualified_resource(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    /// A query parameter.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

fn parse_query(query: &str) -> HashMap<String, String> {
    let decode = |s: &str| {
        let spaced = s.replace('+', " ");
        percent_encoding::percent_decode_str(&spaced)
            .decode_utf8_lossy()
            .into_owned()
    };
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(pair), String::new()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(method: &str, uri: &str) -> ApiRequest {
        let request = Request::builder().method(method).uri(uri).body(()).unwrap();
        ApiRequest::parse(&request).unwrap()
    }

    #[test]
    fn paths_decode_to_resources() {
        let r = parse("GET", "/api/v1/namespaces/ns1/pods/p1/status");
        assert_eq!(
            (
                r.verb,
                r.group.as_str(),
                r.resource.as_str(),
                r.namespace.as_deref(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            (
                Verb::Get,
                "",
                "pods",
                Some("ns1"),
                Some("p1"),
                Some("status")
            )
        );
        let r = parse(
            "GET",
            "/apis/apps/v1/deployments?watch=true&labelSelector=app%3Dweb%2Ctier+in+%28a%29",
        );
        assert_eq!(
            (r.verb, r.group.as_str(), r.namespace.as_deref()),
            (Verb::Watch, "apps", None)
        );
        assert_eq!(r.param("labelSelector"), Some("app=web,tier in (a)"));
        let r = parse("GET", "/api/v1/namespaces/kube-system");
        assert_eq!(
            (
                r.resource.as_str(),
                r.name.as_deref(),
                r.namespace.as_deref()
            ),
            ("namespaces", Some("kube-system"), None)
        );
        let r = parse("DELETE", "/api/v1/namespaces/a/configmaps");
        assert_eq!(r.verb, Verb::DeleteCollection);
        assert_eq!(r.qualified_resource(), "configmaps");
        let r = parse("POST", "/api/v1/namespaces/a/pods/p/binding");
        assert_eq!(
            (r.verb, r.resource_path().as_str()),
            (Verb::Create, "pods/binding")
        );
        assert!(ApiRequest::parse(&Request::get("/version").body(()).unwrap()).is_none());
    }
}
