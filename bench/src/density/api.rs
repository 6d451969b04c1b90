//! The few calls the density run makes itself (namespaces, Deployments,
//! the churn's deletions), over the bench's plain HTTP client, with the
//! answers they must get.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use hyper::StatusCode;
use serde_json::Value;

use crate::apiserver::http::{Answer, Connection};
use crate::apiserver::ApiError;

fn expect(
    answer: Result<Answer, ApiError>,
    what: &str,
    fine: &[StatusCode],
) -> Result<Answer, String> {
    let answer = answer.map_err(|e| format!("{what}: {e}"))?;
    if fine.contains(&answer.status) {
        return Ok(answer);
    }
    Err(format!(
        "{what}: {}: {}",
        answer.status,
        String::from_utf8_lossy(&answer.body[..answer.body.len().min(500)])
    ))
}

/// POSTs `body` to `path`; 201 expected.
pub async fn create(connection: &mut Connection, path: &str, body: Bytes) -> Result<(), String> {
    let answer = connection.post(path, body).await;
    expect(answer, &format!("POST {path}"), &[StatusCode::CREATED]).map(drop)
}

/// DELETEs `path`; gone already counts as deleted.
pub async fn delete(connection: &mut Connection, path: &str) -> Result<(), String> {
    let fine = [StatusCode::OK, StatusCode::ACCEPTED, StatusCode::NOT_FOUND];
    expect(
        connection.delete(path).await,
        &format!("DELETE {path}"),
        &fine,
    )
    .map(drop)
}

/// GETs `path` as JSON.
pub async fn get_json(connection: &mut Connection, path: &str) -> Result<Value, String> {
    let answer = expect(
        connection.get(path).await,
        &format!("GET {path}"),
        &[StatusCode::OK],
    )?;
    serde_json::from_slice(&answer.body).map_err(|e| format!("GET {path}: {e}"))
}

/// What [`each`] does with one item on a client's connection.
pub enum Call {
    Create(String, Bytes),
    Delete(String),
}

/// Makes every call with `clients` connections at once; the first failure ends it.
pub async fn each(
    port: u16,
    calls: Vec<Call>,
    clients: usize,
    timeout: Duration,
) -> Result<(), String> {
    let queue = Arc::new(Mutex::new(calls));
    let mut tasks = Vec::new();
    for _ in 0..clients.max(1) {
        let queue = queue.clone();
        tasks.push(tokio::spawn(async move {
            let mut connection = Connection::new(port, timeout);
            loop {
                let next = queue.lock().expect("queue").pop();
                match next {
                    None => return Ok::<(), String>(()),
                    Some(Call::Create(path, body)) => create(&mut connection, &path, body).await?,
                    Some(Call::Delete(path)) => delete(&mut connection, &path).await?,
                }
            }
        }));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}

/// How many nodes have the condition Ready True.
pub async fn ready_nodes(connection: &mut Connection) -> Result<usize, String> {
    let list = get_json(connection, "/api/v1/nodes").await?;
    let ready = |node: &&Value| {
        node["status"]["conditions"].as_array().is_some_and(|all| {
            all.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
    };
    Ok(list["items"]
        .as_array()
        .map_or(0, |items| items.iter().filter(ready).count()))
}
