//! Discovery: legacy (APIVersions, APIGroupList, APIResourceList) and
//! aggregated (apidiscovery.k8s.io/v2), chosen by the Accept header.

use actix_web::{web, HttpMessage, HttpRequest, HttpResponse};

use crate::aggregator::discovery::{aggregated_items, kube_order, merge};
use crate::aggregator::registration::local_priority;
use crate::auth::UserInfo;
use serde_json::{json, Value};

use super::reviews::{Review, REVIEWS};
use super::AppState;
use crate::error::ApiError;
use crate::registry::catalog::Entry;
use crate::registry::subresource::{ResponseKind, Subresource};
use crate::registry::ResourceDef;

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

fn wants_aggregated(req: &HttpRequest) -> bool {
    let accept = req
        .headers()
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    accept.split(',').any(|a| {
        a.contains("as=APIGroupDiscoveryList") && a.contains("v=v2") && !a.contains("v2beta1")
    })
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// What a subresource of `def`'s kind answers with (its own kind unless
/// its table says otherwise).
fn response_of(def: &ResourceDef, sub: &Subresource) -> ResponseKind {
    sub.response.unwrap_or(ResponseKind {
        group: def.group,
        version: def.version,
        kind: def.kind,
    })
}

fn kind_value(kind: ResponseKind) -> Value {
    json!({"group": kind.group, "version": kind.version, "kind": kind.kind})
}

/// An entry's resource, its subresources and the older collections its
/// table names, as aggregated discovery lists them.
fn aggregated_resources(entry: &Entry) -> Vec<Value> {
    let def = entry.strategy.def();
    let subresources: Vec<Value> = def
        .subresources
        .iter()
        .map(|sub| json!({"subresource": sub.name, "responseKind": kind_value(response_of(def, sub)), "verbs": sub.verbs}))
        .collect();
    let own = ResponseKind {
        group: def.group,
        version: def.version,
        kind: def.kind,
    };
    let mut resources = vec![json!({
        "resource": def.resource, "responseKind": kind_value(own),
        "scope": scope(def.namespaced), "singularResource": def.singular,
        "verbs": def.verbs(), "shortNames": def.short_names, "categories": def.categories, "subresources": subresources,
    })];
    for (collection, sub) in collections(def) {
        let kind = response_of(def, sub);
        resources.push(json!({"resource": collection, "responseKind": kind_value(kind),
            "scope": scope(def.namespaced), "singularResource": kind.kind.to_lowercase(), "verbs": sub.verbs}));
    }
    resources
}

/// The older collections `def`'s table names, with their subresource.
fn collections(def: &ResourceDef) -> impl Iterator<Item = (&'static str, &'static Subresource)> {
    def.subresources
        .iter()
        .filter_map(|sub| Some((sub.collection?, sub)))
}

/// An entry's resource, its subresources and the older collections its
/// table names, as an APIResourceList lists them.
fn listed_resources(entry: &Entry) -> Vec<Value> {
    let def = entry.strategy.def();
    let mut resources = vec![
        json!({"name": def.resource, "singularName": def.singular, "namespaced": def.namespaced,
        "kind": def.kind, "verbs": def.verbs(), "shortNames": def.short_names, "categories": def.categories}),
    ];
    let listed = |name: String, singular: String, sub: &Subresource| {
        let kind = response_of(def, sub);
        let mut item = json!({"name": name, "singularName": singular, "namespaced": def.namespaced,
            "kind": kind.kind, "verbs": sub.verbs});
        if (kind.group, kind.version) != (def.group, def.version) {
            item["group"] = kind.group.into();
            item["version"] = kind.version.into();
        }
        item
    };
    for sub in def.subresources {
        resources.push(listed(
            format!("{}/{}", def.resource, sub.name),
            String::new(),
            sub,
        ));
    }
    for (collection, sub) in collections(def) {
        let singular = response_of(def, sub).kind.to_lowercase();
        resources.push(listed(collection.to_string(), singular, sub));
    }
    resources
}

/// Served groups with their versions: the catalog's, then the reviews';
/// each group's versions in kube's order of preference (the first is the
/// preferred one).
fn all_groups(state: &AppState) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut pairs = state.catalog.groups();
    for review in &REVIEWS {
        if !pairs.contains(&(review.group, review.version)) {
            pairs.push((review.group, review.version));
        }
    }
    let mut groups: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for (group, version) in pairs {
        match groups.iter_mut().find(|(g, _)| *g == group) {
            Some((_, versions)) => versions.push(version),
            None => groups.push((group, vec![version])),
        }
    }
    for (_, versions) in &mut groups {
        versions.sort_by_key(|v| kube_order(v));
    }
    groups
}

fn reviews_in<'a>(group: &'a str, version: &'a str) -> impl Iterator<Item = &'static Review> + 'a {
    REVIEWS
        .iter()
        .filter(move |r| r.group == group && r.version == version)
}

fn scope(namespaced: bool) -> &'static str {
    if namespaced {
        "Namespaced"
    } else {
        "Cluster"
    }
}

fn aggregated_review(review: &Review) -> Value {
    json!({"resource": review.resource, "scope": scope(review.namespaced), "singularResource": "",
           "responseKind": {"group": review.group, "version": review.version, "kind": review.kind},
           "verbs": ["create"]})
}

fn aggregated(state: &AppState, core: bool) -> HttpResponse {
    let items: Vec<Value> = all_groups(state)
        .into_iter()
        .filter(|(group, _)| group.is_empty() == core)
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|version| {
                    let mut resources: Vec<Value> = entries(state, group, version)
                        .iter()
                        .flat_map(aggregated_resources)
                        .collect();
                    resources.extend(reviews_in(group, version).map(aggregated_review));
                    json!({"version": version, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": group}, "versions": versions})
        })
        .collect();
    let items = match core {
        true => items,
        false => with_extensions(
            items,
            |item| item["metadata"]["name"].as_str(),
            || aggregated_items(&state.aggregator.available()),
        ),
    };
    let body = json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items});
    HttpResponse::Ok()
        .content_type(AGGREGATED)
        .body(body.to_string())
}

fn entries(state: &AppState, group: &str, version: &str) -> Vec<Entry> {
    let mut all = state.catalog.all_entries();
    all.retain(|e| e.strategy.def().group == group && e.strategy.def().version == version);
    all
}

pub async fn core(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    if wants_aggregated(&req) {
        return aggregated(&state, true);
    }
    HttpResponse::Ok().json(json!({"kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": req.connection_info().host()}]}))
}

fn api_group(group: &str, versions: &[&str]) -> Value {
    let gv =
        |version: &&str| json!({"groupVersion": group_version(group, version), "version": version});
    let all: Vec<Value> = versions.iter().map(gv).collect();
    json!({"name": group, "versions": all, "preferredVersion": versions.first().map(gv)})
}

pub async fn groups(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    if wants_aggregated(&req) {
        return aggregated(&state, false);
    }
    let groups: Vec<Value> = all_groups(&state)
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, v)| api_group(g, &v))
        .collect();
    let groups = with_extensions(
        groups,
        |g| g["name"].as_str(),
        || {
            let extensions = extension_groups(&state).into_iter();
            extensions
                .map(|(_, priority, group)| (priority, group))
                .collect()
        },
    );
    HttpResponse::Ok().json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
}

pub async fn group(
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let group = path.into_inner();
    let local = all_groups(&state).into_iter().find(|(g, _)| *g == group);
    let mut body = match local {
        Some((g, v)) => api_group(g, &v),
        None => extension_groups(&state)
            .into_iter()
            .find(|(name, _, _)| *name == group)
            .map(|(_, _, body)| body)
            .ok_or(ApiError::UnknownPath)?,
    };
    body["kind"] = "APIGroup".into();
    body["apiVersion"] = "v1".into();
    Ok(HttpResponse::Ok().json(body))
}

fn resource_list(state: &AppState, group: &str, version: &str) -> Result<HttpResponse, ApiError> {
    let mut resources = Vec::new();
    for entry in &entries(state, group, version) {
        resources.extend(listed_resources(entry));
    }
    for review in reviews_in(group, version) {
        resources.push(
            json!({"name": review.resource, "singularName": "", "namespaced": review.namespaced,
            "kind": review.kind, "verbs": ["create"]}),
        );
    }
    if resources.is_empty() {
        return Err(ApiError::UnknownPath);
    }
    Ok(HttpResponse::Ok().json(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version(group, version), "resources": resources})))
}

pub async fn core_resources(
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    resource_list(&state, "", &path.into_inner())
}

/// A group/version's resources: this server's, or those of the
/// extension API server its APIService names (asked as the user).
pub async fn group_resources(
    req: HttpRequest,
    payload: web::Payload,
    path: web::Path<(String, String)>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (group, version) = path.into_inner();
    if let Some(remote) = state.aggregator.remote(&group, &version) {
        let user = req.extensions().get::<UserInfo>().cloned();
        let user =
            user.ok_or_else(|| ApiError::Internal("no user for a proxied request".into()))?;
        return super::aggregated::proxy(&req, payload, &state, &remote, &user).await;
    }
    resource_list(&state, &group, &version)
}

/// The available extension groups (`crate::aggregator`): name,
/// priority and APIGroup value.
fn extension_groups(state: &AppState) -> Vec<(String, i64, Value)> {
    let available = state.aggregator.available();
    let groups = crate::aggregator::discovery::groups(&available);
    let as_group = |g: crate::aggregator::discovery::Group| {
        let versions: Vec<&str> = g.versions.iter().map(String::as_str).collect();
        let body = api_group(&g.name, &versions);
        (g.name, g.priority, body)
    };
    groups.into_iter().map(as_group).collect()
}

/// This server's groups (`local`, named by `name_of`) with the extension
/// groups `extensions` gives placed among them by priority, as kube
/// orders them (this server's groups have kube's own priorities).
fn with_extensions(
    local: Vec<Value>,
    name_of: impl Fn(&Value) -> Option<&str>,
    extensions: impl FnOnce() -> Vec<(i64, Value)>,
) -> Vec<Value> {
    let local = local
        .into_iter()
        .map(|item| (local_priority(name_of(&item).unwrap_or(""), "").0, item))
        .collect();
    merge(local, extensions())
}

#[cfg(test)]
mod tests {
    use actix_web::http::Method;

    use super::*;
    use crate::registry::actor::ResourceActor;
    use crate::registry::kinds::example::widgets;
    use crate::routes::request_info::RequestInfo;

    /// The example kind (`registry::kinds::example`), served over memory.
    async fn widgets() -> Entry {
        let handle = widgets::handle();
        let arbiter = actix::Arbiter::current();
        let strategy = handle.strategy.clone();
        let (actor, handle) = ResourceActor::start(handle, &arbiter).await.unwrap();
        Entry {
            strategy,
            actor,
            handle,
            primary: true,
        }
    }

    #[actix_rt::test]
    async fn a_kinds_subresources_are_discovered_and_routed_from_its_table_alone() {
        let entry = widgets().await;
        let listed = listed_resources(&entry);
        let names: Vec<&str> = listed.iter().filter_map(|r| r["name"].as_str()).collect();
        assert_eq!(
            names,
            ["widgets", "widgets/status", "widgets/polish", "polishings"]
        );
        assert_eq!(listed[2]["verbs"], json!(["create"]));
        assert_eq!(listed[3]["singularName"], "widget");
        let aggregated = aggregated_resources(&entry);
        let subresources = &aggregated[0]["subresources"];
        assert_eq!(subresources[1]["subresource"], "polish");
        assert_eq!(
            subresources[1]["responseKind"],
            json!({"group": "example.capstan.dev", "version": "v1", "kind": "Widget"})
        );
        let path = "/apis/example.capstan.dev/v1/namespaces/default/widgets/w/polish";
        let info = RequestInfo::parse(&Method::POST, path, false).unwrap();
        let own = crate::routes::subresource::own(&entry, &info).expect("served by its kind");
        assert_eq!(own.name, "polish");
        let path = "/apis/example.capstan.dev/v1/namespaces/default/widgets/w/status";
        let status = RequestInfo::parse(&Method::PUT, path, false).unwrap();
        assert!(crate::routes::subresource::own(&entry, &status).is_none());
    }
}
