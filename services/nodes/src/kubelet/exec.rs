//! `/exec/{namespace}/{pod}/{container}?command=...&stdin=...&stdout=...
//! &stderr=...&tty=...`, over a websocket with the channel protocol (what
//! kubectl 1.30+ speaks first, and what an API server proxying the
//! upgrade passes through). The command is simulated (see `shell`).
//! SPDY, kubectl's fallback, is not served: the refusal says so.

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{WebSocket, WebSocketUpgrade};
use axum::extract::{Path, RawQuery};
use axum::http::StatusCode;
use axum::response::Response;
use k8s_openapi::api::core::v1::Container;

use super::shell::{self, Run};
use super::streams::{self, Input, PROTOCOLS, STDERR, STDOUT};
use super::target;
use crate::serving::{status, Call};

/// What the caller asked to run and which streams it opened.
struct Request {
    command: Vec<String>,
    tty: bool,
}

fn parse(query: Option<&str>) -> Request {
    let mut request = Request {
        command: Vec::new(),
        tty: false,
    };
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "command" => request.command.push(value.into_owned()),
            "tty" => request.tty = value == "true" || value == "1",
            _ => {}
        }
    }
    request
}

pub async fn exec(
    call: Call,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let target = match target(&call, (&namespace, &pod, &container)).await {
        Ok(target) => target,
        Err(refused) => return refused,
    };
    let running = target
        .status()
        .and_then(|s| s.state.as_ref()?.running.as_ref())
        .is_some();
    if !running {
        let message = format!("container \"{container}\" in pod \"{pod}\" is not running");
        return status(StatusCode::BAD_REQUEST, "BadRequest", message);
    }
    let Ok(upgrade) = upgrade else {
        let message = format!(
            "exec is served over websockets ({}); SPDY is not simulated by capstan-nodes",
            PROTOCOLS.join(", ")
        );
        return status(StatusCode::BAD_REQUEST, "BadRequest", message);
    };
    let request = parse(query.as_deref());
    if request.command.is_empty() {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "you must specify at least one command for the container".into(),
        );
    }
    let simulated = simulated_container(&target.container, &pod);
    upgrade
        .protocols(PROTOCOLS)
        .on_upgrade(move |socket| converse(socket, request, simulated))
}

/// The environment a command sees: the spec's literal values, HOSTNAME.
fn simulated_container(spec: &Container, pod: &str) -> shell::Container {
    let mut env = vec![("HOSTNAME".to_string(), pod.to_string())];
    for var in spec.env.iter().flatten() {
        if let Some(value) = &var.value {
            env.push((var.name.clone(), value.clone()));
        }
    }
    env.push((
        "PATH".into(),
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
    ));
    shell::Container {
        hostname: pod.to_string(),
        env,
    }
}

async fn converse(mut socket: WebSocket, request: Request, container: shell::Container) {
    let code = match shell::run(&request.command, &container) {
        Run::Done {
            stdout,
            stderr,
            code,
        } => {
            let errors = if request.tty { STDOUT } else { STDERR };
            let _ = streams::send(&mut socket, STDOUT, stdout.as_bytes()).await
                && streams::send(&mut socket, errors, stderr.as_bytes()).await;
            code
        }
        Run::Echo => {
            while let Some(input) = streams::receive(&mut socket).await {
                match input {
                    Input::Data(data) if !streams::send(&mut socket, STDOUT, &data).await => return,
                    Input::Closed => break,
                    _ => {}
                }
            }
            0
        }
        Run::Sleep(duration) => {
            let sleep = tokio::time::sleep(duration);
            tokio::pin!(sleep);
            loop {
                tokio::select! {
                    _ = &mut sleep => break 0,
                    input = streams::receive(&mut socket) => if input.is_none() { return },
                }
            }
        }
    };
    streams::finish(socket, &request.command, code).await;
}

#[cfg(test)]
#[path = "exec_tests.rs"]
mod tests;
