//! Untimed setup on a fresh API server: the namespaces, the ConfigMap the
//! get workload reads, and the ConfigMaps the list workload lists.

use std::time::Duration;

use hyper::StatusCode;

use super::answers::{self, configmap, namespace};
use super::error::{ApiError, WrongAnswer};
use super::http::{Answer, Connection};
use super::{collection, CREATE_NAMESPACE, GET_NAME, GET_NAMESPACE, LIST_NAMESPACE};

/// Concurrent creators filling the list namespace.
const FILLERS: usize = 16;

/// Creates everything the workloads need, then checks that a list sees
/// exactly the `list_size` objects just made.
pub async fn prepare(port: u16, timeout: Duration, list_size: usize) -> Result<(), ApiError> {
    let mut http = Connection::new(port, timeout);
    for name in [LIST_NAMESPACE, CREATE_NAMESPACE] {
        let answer = http.post("/api/v1/namespaces", namespace(name)).await?;
        expect_created(&answer, format!("create namespace {name}"))?;
    }
    create(&mut http, GET_NAMESPACE, GET_NAME).await?;
    let fillers = (0..FILLERS).map(|first| async move {
        let mut http = Connection::new(port, timeout);
        for i in (first..list_size).step_by(FILLERS) {
            create(&mut http, LIST_NAMESPACE, &format!("item-{i:05}")).await?;
        }
        Ok::<_, ApiError>(())
    });
    for result in futures::future::join_all(fillers).await {
        result?;
    }
    let answer = http.get(&collection(LIST_NAMESPACE)).await?;
    let items = answers::check_list(&answer, list_size).map_err(|source| ApiError::Wrong {
        what: format!("list {LIST_NAMESPACE} after filling it"),
        source,
    })?;
    match items == list_size {
        true => Ok(()),
        false => Err(ApiError::Wrong {
            what: format!("list {LIST_NAMESPACE} after filling it"),
            source: WrongAnswer::Field {
                field: "the number of items",
                got: items.to_string(),
                want: list_size.to_string(),
            },
        }),
    }
}

pub(super) async fn create(
    http: &mut Connection,
    namespace: &str,
    name: &str,
) -> Result<(), ApiError> {
    let answer = http.post(&collection(namespace), configmap(name)).await?;
    answers::check_create(&answer, name)
        .map(drop)
        .map_err(|source| ApiError::Wrong {
            what: format!("create configmap {namespace}/{name}"),
            source,
        })
}

pub(super) fn expect_created(answer: &Answer, what: String) -> Result<(), ApiError> {
    answers::expect_status(answer, StatusCode::CREATED)
        .map_err(|source| ApiError::Wrong { what, source })
}
