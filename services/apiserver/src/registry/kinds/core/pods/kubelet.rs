//! The pod subresources a kubelet serves: `log`, `exec`, `attach` and
//! `portforward`. As kube-apiserver's pod registry, this only checks the
//! request against the pod (it exists, the container is one of its own
//! or the only one, it has a node), admits the connect ones as CONNECT
//! with their options object, and says which path of which node's
//! kubelet answers; the gateway carries the bytes (`routes::connect`).

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::log_options::{self, encode};
use crate::error::ApiError;
use crate::registry::storage_errors::{self, Reading};
use crate::registry::subresource::{Call, Connecter, Location, ResponseKind, Serve, Subresource};
use crate::storage::ReadAt;

/// The entries of the pods' table a kubelet serves (exec, attach and
/// portforward are upgraded connections, opened with GET or POST).
pub const KUBELET: [Subresource; 4] = [
    connect(&Kubelet("log"), "Pod", &["get"]),
    connect(&Kubelet("exec"), "PodExecOptions", &["create", "get"]),
    connect(&Kubelet("attach"), "PodAttachOptions", &["create", "get"]),
    connect(
        &Kubelet("portforward"),
        "PodPortForwardOptions",
        &["create", "get"],
    ),
];

const fn connect(
    kubelet: &'static Kubelet,
    kind: &'static str,
    verbs: &'static [&'static str],
) -> Subresource {
    Subresource {
        name: kubelet.0,
        response: Some(ResponseKind {
            group: "",
            version: "v1",
            kind,
        }),
        verbs,
        serve: Serve::Connect(kubelet),
        collection: None,
    }
}

/// One subresource a kubelet serves, by name.
pub struct Kubelet(&'static str);

impl Connecter for Kubelet {
    fn locate<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Option<Location>, ApiError>> {
        Box::pin(locate(call, self.0))
    }
}

/// kube's order: admission of the options first (a log is a read, not
/// admitted), then the pod, then where its kubelet serves the request.
async fn locate(call: Call<'_>, subresource: &'static str) -> Result<Option<Location>, ApiError> {
    if subresource == "log" {
        let options = log_options::parse(call.query, call.name)?;
        let pod = read_pod(&call).await?;
        let container = container(&pod, call.name, call.query)?;
        let Some(node) = node_of(&pod) else {
            return Ok(None);
        };
        let path = format!(
            "/containerLogs/{}/{}/{container}{}",
            call.namespace,
            call.name,
            options.kubelet_query()
        );
        return Ok(Some(Location {
            node,
            path,
            upgrade: false,
            insecure: options.insecure_skip_tls_verify_backend,
        }));
    }
    let mut options = connect_options(subresource, &call);
    call.admit_connect(subresource, &mut options).await?;
    let pod = read_pod(&call).await?;
    let path = match subresource {
        "portforward" => {
            let ports = call.pairs.iter().filter(|(k, _)| k == "ports");
            let query = encode(ports.map(|(k, v)| (k.as_str(), v.as_str())));
            format!("/portForward/{}/{}{query}", call.namespace, call.name)
        }
        _ => {
            let container = container(&pod, call.name, call.query)?;
            let query = encode(stream_params(&options));
            format!(
                "/{subresource}/{}/{}/{container}{query}",
                call.namespace, call.name
            )
        }
    };
    let node = node_of(&pod).ok_or_else(|| {
        ApiError::BadRequest(format!("pod {} does not have a host assigned", call.name))
    })?;
    Ok(Some(Location {
        node,
        path,
        upgrade: true,
        insecure: false,
    }))
}

async fn read_pod(call: &Call<'_>) -> Result<Value, ApiError> {
    let found = call.store.get_at(&call.key, ReadAt::Latest).await;
    let found =
        found.map_err(|e| storage_errors::api_error(e, call.target.clone(), Reading::Plain))?;
    Ok(found
        .ok_or_else(|| ApiError::NotFound(call.target.clone()))?
        .object)
}

fn node_of(pod: &Value) -> Option<String> {
    let node = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty())?;
    Some(node.to_string())
}

/// The options object admission sees (PodExecOptions, ...), from the
/// query as kube converts it.
fn connect_options(subresource: &str, call: &Call<'_>) -> Value {
    let flag = |key: &str| matches!(call.query.get(key).map(String::as_str), Some("true" | "1"));
    let values = |key: &str| -> Vec<&str> {
        let pairs = call.pairs.iter().filter(|(k, _)| k == key);
        pairs.map(|(_, v)| v.as_str()).collect()
    };
    let mut options = match subresource {
        "portforward" => {
            let ports: Vec<i64> = values("ports")
                .iter()
                .flat_map(|p| p.split(','))
                .filter_map(|p| p.trim().parse().ok())
                .collect();
            json!({"kind": "PodPortForwardOptions", "ports": ports})
        }
        _ => {
            let mut options = json!({
                "stdin": flag("stdin"), "stdout": flag("stdout"),
                "stderr": flag("stderr"), "tty": flag("tty"),
            });
            if let Some(container) = call.query.get("container").filter(|c| !c.is_empty()) {
                options["container"] = container.as_str().into();
            }
            if subresource == "exec" {
                options["kind"] = "PodExecOptions".into();
                options["command"] = json!(values("command"));
            } else {
                options["kind"] = "PodAttachOptions".into();
            }
            options
        }
    };
    options["apiVersion"] = "v1".into();
    options
}

/// The kubelet's names for an exec's or attach's streams, as kube's
/// `streamParams` writes them.
fn stream_params(options: &Value) -> Vec<(&'static str, &str)> {
    let mut params = Vec::new();
    for (field, param) in [
        ("stdin", "input"),
        ("stdout", "output"),
        ("stderr", "error"),
        ("tty", "tty"),
    ] {
        if options[field].as_bool() == Some(true) {
            params.push((param, "1"));
        }
    }
    for argument in options["command"].as_array().into_iter().flatten() {
        params.push(("command", argument.as_str().unwrap_or_default()));
    }
    params
}

/// The container a request names, or the pod's only one.
fn container(
    pod: &Value,
    name: &str,
    query: &crate::registry::options::Query,
) -> Result<String, ApiError> {
    let containers: Vec<&str> = ["containers", "initContainers"]
        .iter()
        .flat_map(|field| pod["spec"][field].as_array().into_iter().flatten())
        .filter_map(|c| c["name"].as_str())
        .collect();
    match query.get("container").filter(|c| !c.is_empty()) {
        Some(container) if !containers.contains(&container.as_str()) => Err(ApiError::BadRequest(
            format!("container {container} is not valid for pod {name}"),
        )),
        Some(container) => Ok(container.clone()),
        None if pod["spec"]["containers"].as_array().map_or(0, Vec::len) == 1 => {
            Ok(containers[0].to_string())
        }
        None => Err(ApiError::BadRequest(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            containers.join(" ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_options_become_the_kubelets_stream_parameters() {
        let options = json!({"stdin": true, "stdout": true, "stderr": false, "tty": false,
                             "command": ["sh", "-c", "echo a&b"]});
        let query = encode(stream_params(&options));
        assert_eq!(
            query,
            "?input=1&output=1&command=sh&command=-c&command=echo+a%26b"
        );
        assert_eq!(encode(Vec::<(&str, &str)>::new()), "");
    }

    #[test]
    fn the_only_container_is_chosen_and_a_stranger_refused() {
        let pod = json!({"spec": {"containers": [{"name": "app"}],
                                  "initContainers": [{"name": "init"}]}});
        let mut query = crate::registry::options::Query::new();
        assert_eq!(container(&pod, "p", &query).unwrap(), "app");
        query.insert("container".into(), "init".into());
        assert_eq!(container(&pod, "p", &query).unwrap(), "init");
        query.insert("container".into(), "other".into());
        let err = container(&pod, "p", &query).unwrap_err().to_string();
        assert!(
            err.contains("container other is not valid for pod p"),
            "{err}"
        );
    }
}
