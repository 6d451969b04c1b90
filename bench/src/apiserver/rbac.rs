//! The RBAC variant (`--api-rbac`): every API server runs with
//! `--authorization-mode=RBAC` and a static token file, and the workload
//! clients send the token of a plain user, `bench`, whose group is bound
//! to `cluster-admin` by a ClusterRoleBinding (made with an admin token
//! before the runs). So every timed request is authenticated by token and
//! decided by the RBAC index, not by the `system:masters` short cut.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

/// The authorization mode of the variant (`RBAC` unless
/// `--api-authorization-mode` says otherwise, to measure the chain
/// without RBAC's decision but with the same token authentication).
static ON: OnceLock<String> = OnceLock::new();

const ADMIN_TOKEN: &str = "bench-admin-token";
pub const CLIENT_TOKEN: &str = "bench-client-token";
const TOKENS: &str = "bench-admin-token,bench-admin,0,\"system:masters\"\n\
bench-client-token,bench,1,\"bench-clients\"\n";
const BINDING: &str = r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding",
"metadata":{"name":"bench-clients"},
"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cluster-admin"},
"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":"bench-clients"}]}"#;

/// Turns the variant on for the rest of the run, with `mode`.
pub fn enable(mode: &str) {
    let _ = ON.set(mode.to_string());
}

pub fn enabled() -> bool {
    ON.get().is_some()
}

/// The API server flags of the variant; writes the token file in `dir`.
pub fn flags(dir: &Path) -> std::io::Result<Vec<String>> {
    let tokens = dir.join("tokens.csv");
    std::fs::write(&tokens, TOKENS)?;
    let mode = ON.get().map_or("RBAC", String::as_str);
    Ok(vec![
        format!("--authorization-mode={mode}"),
        "--token-auth-file".into(),
        tokens.display().to_string(),
    ])
}

/// How long a new binding may take to reach the server's RBAC index.
const GRANT_WAIT: Duration = Duration::from_secs(10);

/// Binds the clients' group to cluster-admin, as the admin, and waits
/// until the clients are allowed (the binding reaches the authorizer
/// through a watch); the binding's status line, 201 expected.
pub fn bind_clients(port: u16) -> std::io::Result<String> {
    let bound = send(
        port,
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        ADMIN_TOKEN,
        BINDING,
    )?;
    let deadline = std::time::Instant::now() + GRANT_WAIT;
    while std::time::Instant::now() < deadline {
        if send(port, "GET", "/api/v1/namespaces/default", CLIENT_TOKEN, "")?.contains(" 200 ") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(bound)
}

/// One request with `token`; the answer's status line.
fn send(port: u16, method: &str, path: &str, token: &str, body: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         Authorization: Bearer {token}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer.lines().next().unwrap_or("").to_string())
}
