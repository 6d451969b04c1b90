//! Requests as the admin and as narrow identities on a running `capstan`:
//! ServiceAccounts bound to a Role and holding a token from the
//! TokenRequest API, as a workload would hold them, for the tests that
//! attack the server's trust boundary.

use std::time::Duration;

use serde_json::{json, Value};

use crate::http::{Connection, Response};
use crate::poll::wait_for;
use crate::tls::Identity;

const WAIT: Duration = Duration::from_secs(60);

/// A JSON request as the admin; panics unless it answers `want`.
pub fn admin(port: u16, method: &str, path: &str, body: &Value, want: u16) -> Value {
    let (status, answer) = Connection::connect(port)
        .and_then(|mut c| c.json(method, path, Some(body)))
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    assert_eq!(status, want, "{method} {path}: {answer}");
    answer
}

/// A request presenting `identity`.
pub fn send_as(
    port: u16,
    identity: &Identity,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    Connection::connect_as(port, identity)
        .and_then(|mut c| c.send(method, path, headers, body))
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

/// A request presenting `token`.
pub fn as_token(
    port: u16,
    token: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let identity = Identity::Token(token.to_string());
    send_as(port, &identity, method, path, headers, body)
}

/// A GET of JSON presenting `token`.
pub fn get(port: u16, token: &str, path: &str) -> Response {
    as_token(
        port,
        token,
        "GET",
        path,
        &[("Accept", "application/json")],
        &[],
    )
}

/// A JSON write (`PATCH` as a merge patch) presenting `identity`.
pub fn write(port: u16, identity: &Identity, method: &str, path: &str, body: &Value) -> Response {
    Connection::connect_as(port, identity)
        .and_then(|mut c| c.send_json(method, path, Some(body)))
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

/// A ServiceAccount `name` in `namespace` bound to a Role with `rules`,
/// and a token for it.
pub fn service_account(port: u16, namespace: &str, name: &str, rules: Value) -> String {
    let base = format!("/api/v1/namespaces/{namespace}");
    let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}});
    admin(
        port,
        "POST",
        &format!("{base}/serviceaccounts"),
        &account,
        201,
    );
    let rbac = format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}");
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": name}, "rules": rules});
    admin(port, "POST", &format!("{rbac}/roles"), &role, 201);
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]});
    admin(port, "POST", &format!("{rbac}/rolebindings"), &binding, 201);
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {}});
    let path = format!("{base}/serviceaccounts/{name}/token");
    let answer = admin(port, "POST", &path, &request, 201);
    answer["status"]["token"]
        .as_str()
        .unwrap_or_else(|| panic!("no token in {answer}"))
        .to_string()
}

/// Waits until `token` is allowed `GET path` (RBAC's index follows a
/// grant by a watch).
pub fn wait_allowed(port: u16, token: &str, path: &str) {
    wait_for(WAIT, &format!("the grant to allow GET {path}"), || {
        (get(port, token, path).status == 200).then_some(())
    });
}
