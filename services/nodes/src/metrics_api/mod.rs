//! metrics.k8s.io/v1beta1 as metrics-server serves it (NodeMetrics and
//! PodMetrics, list and get, label selectors), for every simulated node
//! of the cluster and the pods on them, behind the API server's
//! aggregator (`kubectl top`, the HPA). Usage is simulated (`usage`).

pub mod register;
pub mod selector;
pub mod usage;

use std::collections::HashMap;

use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use chrono::{SecondsFormat, Utc};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{json, Value};

use crate::quantity::{format_bytes, format_milli};
use crate::serving::authorization::Action;
use crate::serving::{status, Call, State as Shared};
use selector::LabelSelector;
use usage::{pod_usage, SYSTEM_CPU, SYSTEM_MEMORY};

pub const GROUP: &str = "metrics.k8s.io";
pub const VERSION: &str = "v1beta1";
/// The window metrics-server reports for its measurements.
const WINDOW: &str = "30s";

pub fn routes() -> Router<Shared> {
    let base = "/apis/metrics.k8s.io/v1beta1";
    Router::new()
        .route(base, get(resources))
        .route(&format!("{base}/nodes"), get(list_nodes))
        .route(&format!("{base}/nodes/{{name}}"), get(get_node))
        .route(&format!("{base}/pods"), get(list_all_pods))
        .route(
            &format!("{base}/namespaces/{{namespace}}/pods"),
            get(list_pods),
        )
        .route(
            &format!("{base}/namespaces/{{namespace}}/pods/{{name}}"),
            get(get_pod),
        )
}

fn action(verb: &str, resource: &str, namespace: &str, name: &str) -> Action {
    Action {
        verb: verb.into(),
        group: GROUP.into(),
        resource: resource.into(),
        subresource: String::new(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

async fn resources() -> Json<Value> {
    let resource = |name: &str, kind: &str, namespaced: bool| json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind, "verbs": ["get", "list"]});
    Json(json!({
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "metrics.k8s.io/v1beta1",
        "resources": [resource("nodes", "NodeMetrics", false), resource("pods", "PodMetrics", true)],
    }))
}

fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn usage_json(cpu: i64, memory: i64) -> Value {
    json!({"cpu": format_milli(cpu).0, "memory": format_bytes(memory).0})
}

fn pod_metrics(pod: &Pod) -> Option<Value> {
    let containers: Vec<Value> = pod_usage(pod)?
        .into_iter()
        .map(|u| json!({"name": u.container, "usage": usage_json(u.cpu, u.memory)}))
        .collect();
    let at = now();
    Some(json!({
        "kind": "PodMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {"name": pod.metadata.name, "namespace": pod.metadata.namespace,
                     "labels": pod.metadata.labels, "creationTimestamp": at},
        "timestamp": at, "window": WINDOW, "containers": containers,
    }))
}

fn node_metrics(state: &Shared, node: &Node) -> Value {
    let name = node.metadata.name.clone().unwrap_or_default();
    let (mut cpu, mut memory) = (SYSTEM_CPU, SYSTEM_MEMORY);
    for pod in state
        .pods
        .store()
        .by_index(capstan_client::informer::indexes::BY_NODE_NAME, &name)
    {
        for usage in pod_usage(&pod).into_iter().flatten() {
            cpu += usage.cpu;
            memory += usage.memory;
        }
    }
    let at = now();
    json!({
        "kind": "NodeMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {"name": name, "labels": node.metadata.labels, "creationTimestamp": at},
        "timestamp": at, "window": WINDOW, "usage": usage_json(cpu, memory),
    })
}

fn list(kind: &str, items: Vec<Value>) -> Response {
    Json(json!({"kind": kind, "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {}, "items": items})).into_response()
}

fn selector(query: &HashMap<String, String>) -> Result<LabelSelector, Box<Response>> {
    LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str)).map_err(|e| {
        let message = format!("unable to parse requirement: {e}");
        Box::new(status(StatusCode::BAD_REQUEST, "BadRequest", message))
    })
}

fn not_found(resource: &str, name: &str) -> Response {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("{resource}.metrics.k8s.io \"{name}\" not found"),
    )
}

async fn list_nodes(call: Call, Query(query): Query<HashMap<String, String>>) -> Response {
    if let Err(refused) = call.authorize(&action("list", "nodes", "", "")).await {
        return refused;
    }
    let selector = match selector(&query) {
        Ok(s) => s,
        Err(refused) => return *refused,
    };
    let mut nodes = call.state.nodes.store().list();
    nodes.retain(|n| selector.matches(n.metadata.labels.as_ref()));
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    list(
        "NodeMetricsList",
        nodes.iter().map(|n| node_metrics(&call.state, n)).collect(),
    )
}

async fn get_node(call: Call, Path(name): Path<String>) -> Response {
    if let Err(refused) = call.authorize(&action("get", "nodes", "", &name)).await {
        return refused;
    }
    match call.state.nodes.store().get(None, &name) {
        Some(node) => Json(node_metrics(&call.state, &node)).into_response(),
        None => not_found("nodes", &name),
    }
}

async fn pods_in(
    state: &Shared,
    namespace: Option<&str>,
    query: &HashMap<String, String>,
) -> Response {
    let selector = match selector(query) {
        Ok(s) => s,
        Err(refused) => return *refused,
    };
    let store = state.pods.store();
    let mut pods = match namespace {
        Some(ns) => store.list_namespace(ns),
        None => store.list(),
    };
    pods.retain(|p| selector.matches(p.metadata.labels.as_ref()) && on_simulated_node(state, p));
    pods.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    list(
        "PodMetricsList",
        pods.iter().filter_map(|p| pod_metrics(p)).collect(),
    )
}

/// Only pods on simulated nodes have simulated usage.
fn on_simulated_node(state: &Shared, pod: &Pod) -> bool {
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default();
    state.nodes.store().get(None, node).is_some()
}

async fn list_all_pods(call: Call, Query(query): Query<HashMap<String, String>>) -> Response {
    if let Err(refused) = call.authorize(&action("list", "pods", "", "")).await {
        return refused;
    }
    pods_in(&call.state, None, &query).await
}

async fn list_pods(
    call: Call,
    Path(namespace): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    if let Err(refused) = call
        .authorize(&action("list", "pods", &namespace, ""))
        .await
    {
        return refused;
    }
    pods_in(&call.state, Some(&namespace), &query).await
}

async fn get_pod(call: Call, Path((namespace, name)): Path<(String, String)>) -> Response {
    if let Err(refused) = call
        .authorize(&action("get", "pods", &namespace, &name))
        .await
    {
        return refused;
    }
    let pod = call.state.pods.store().get(Some(&namespace), &name);
    match pod
        .filter(|p| on_simulated_node(&call.state, p))
        .and_then(|p| pod_metrics(&p))
    {
        Some(metrics) => Json(metrics).into_response(),
        None => not_found("pods", &name),
    }
}
