//! Webhook configurations for process tests: entries, the objects
//! holding them, and waiting until the server's cache has them.

use std::time::Duration;

use serde_json::{json, Value};

use crate::kubectl::Kubectl;
use crate::poll::wait_for;
use crate::webhook::Webhook;

/// A webhook entry calling `client_config` for creates of `resources`.
pub fn hook(name: &str, client_config: Value, resources: &[&str]) -> Value {
    json!({
        "name": name,
        "clientConfig": client_config,
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": resources}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    })
}

/// A clientConfig reaching `server` at `path` by URL, trusting its CA.
pub fn url_config(server: &Webhook, path: &str) -> Value {
    json!({"url": server.url(path), "caBundle": server.ca_bundle()})
}

/// Creates a (Mutating|Validating)WebhookConfiguration of `hooks`.
pub fn create_config(kubectl: &Kubectl, kind: &str, name: &str, hooks: Vec<Value>) {
    let config = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": name}, "webhooks": hooks,
    });
    kubectl.ok_with_input(&["create", "-f", "-"], &config.to_string());
}

/// A dry-run create of `args` until the webhooks refuse it with
/// `expected` (the configuration reaches the server's cache shortly after
/// it is written).
pub fn wait_refused(kubectl: &Kubectl, args: &[&str], expected: &str) -> String {
    let mut args = args.to_vec();
    args.push("--dry-run=server");
    wait_for(
        Duration::from_secs(30),
        &format!("{args:?} to be refused with {expected}"),
        || {
            let out = kubectl.run(&args);
            let stderr = String::from_utf8_lossy(&out.stderr).to_string();
            (!out.status.success() && stderr.contains(expected)).then_some(stderr)
        },
    )
}

/// `kubectl <args> -o json`, parsed.
pub fn json_of(kubectl: &Kubectl, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    serde_json::from_str(&kubectl.ok(&args)).expect("kubectl prints JSON")
}

/// A JSON value as a response's base64 `patch` holds it.
pub fn base64_json(value: &Value) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(value.to_string())
}
