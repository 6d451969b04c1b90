//! `GET /containerLogs/{namespace}/{pod}/{container}` with the kubelet's
//! query (`follow`, `tailLines`, `previous`, `timestamps`, `sinceSeconds`,
//! `sinceTime`, `limitBytes`): the simulated log of the current or the
//! previous run, streamed a batch of lines at a time, and followed while
//! the container runs.

use std::collections::HashMap;
use std::convert::Infallible;

use axum::body::Body;
use axum::extract::{Path, Query};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream;
use k8s_openapi::api::core::v1::ContainerStatus;

use super::logs::{render, since_seconds, LogOptions, RunLog};
use super::{target, Target};
use crate::serving::{status, Call, State as Shared};

/// Lines per chunk of the body.
const BATCH: u64 = 1000;

pub async fn logs(
    call: Call,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let target = match target(&call, (&namespace, &pod, &container)).await {
        Ok(target) => target,
        Err(refused) => return refused,
    };
    let options = match options(&query) {
        Ok(options) => options,
        Err(message) => return status(StatusCode::BAD_REQUEST, "BadRequest", message),
    };
    let previous = flag(&query, "previous");
    let run = match run_of(&target, previous) {
        Ok(run) => run,
        Err(message) => return status(StatusCode::BAD_REQUEST, "BadRequest", message),
    };
    let follow = flag(&query, "follow") && !previous && run.finished.is_none();
    let key = (namespace, pod);
    let body = Body::from_stream(lines(call.state, key, target, run, options, follow));
    ([(header::CONTENT_TYPE, "text/plain")], body).into_response()
}

fn flag(query: &HashMap<String, String>, name: &str) -> bool {
    query.get(name).is_some_and(|v| v == "true" || v == "1")
}

fn options(query: &HashMap<String, String>) -> Result<LogOptions, String> {
    let number = |name: &str| -> Result<Option<i64>, String> {
        query
            .get(name)
            .map(|v| {
                v.parse::<i64>()
                    .map_err(|_| format!("{name}: {v:?} is not an integer"))
            })
            .transpose()
    };
    let now = Utc::now();
    let since = match (number("sinceSeconds")?, query.get("sinceTime")) {
        (Some(_), Some(_)) => {
            return Err("at most one of sinceTime or sinceSeconds may be specified".into())
        }
        (Some(s), None) if s < 1 => return Err("sinceSeconds: must be greater than 0".into()),
        (Some(s), None) => Some(since_seconds(now, s)),
        (None, Some(t)) => Some(
            DateTime::parse_from_rfc3339(t)
                .map_err(|_| format!("sinceTime: {t:?} is not an RFC 3339 time"))?
                .to_utc(),
        ),
        (None, None) => None,
    };
    let non_negative = |name: &str, v: Option<i64>| match v {
        Some(v) if v < 0 => Err(format!("{name}: must be greater than or equal to 0")),
        v => Ok(v.map(|v| v as u64)),
    };
    Ok(LogOptions {
        tail_lines: non_negative("tailLines", number("tailLines")?)?,
        since,
        timestamps: flag(query, "timestamps"),
        limit_bytes: non_negative("limitBytes", number("limitBytes")?)?.filter(|v| *v > 0),
    })
}

/// The run to read: the current one, or the one before it.
fn run_of(target: &Target, previous: bool) -> Result<RunLog, String> {
    let (name, pod) = (
        &target.container.name,
        target.pod.metadata.name.as_deref().unwrap_or_default(),
    );
    let status = target.status();
    let run = |started: Option<DateTime<Utc>>, finished: Option<(DateTime<Utc>, i32)>| RunLog {
        container: name.clone(),
        image: status.map(|s| s.image.clone()).unwrap_or_default(),
        node: target.node.clone(),
        started: started.unwrap_or_else(Utc::now),
        finished,
    };
    if previous {
        let last = status
            .and_then(|s| s.last_state.as_ref()?.terminated.clone())
            .ok_or_else(|| {
                format!("previous terminated container \"{name}\" in pod \"{pod}\" not found")
            })?;
        let finished = last.finished_at.map(|t| (t.0, last.exit_code));
        return Ok(run(last.started_at.map(|t| t.0), finished));
    }
    current(status)
        .map(|(started, finished)| run(Some(started), finished))
        .ok_or_else(|| {
            let reason = status
                .and_then(|s| s.state.as_ref()?.waiting.as_ref()?.reason.clone())
                .unwrap_or_else(|| "ContainerCreating".into());
            format!("container \"{name}\" in pod \"{pod}\" is waiting to start: {reason}")
        })
}

type Span = (DateTime<Utc>, Option<(DateTime<Utc>, i32)>);

/// The current run's start, and its end if it ended.
fn current(status: Option<&ContainerStatus>) -> Option<Span> {
    let state = status?.state.as_ref()?;
    if let Some(running) = &state.running {
        return Some((running.started_at.as_ref()?.0, None));
    }
    let terminated = state.terminated.as_ref()?;
    let started = terminated
        .started_at
        .as_ref()
        .or(terminated.finished_at.as_ref())?
        .0;
    Some((
        started,
        terminated
            .finished_at
            .as_ref()
            .map(|t| (t.0, terminated.exit_code)),
    ))
}

struct Cursor {
    state: Shared,
    key: (String, String),
    target: Target,
    run: RunLog,
    options: LogOptions,
    follow: bool,
    next: Option<u64>,
    sent: u64,
}

fn lines(
    state: Shared,
    key: (String, String),
    target: Target,
    run: RunLog,
    options: LogOptions,
    follow: bool,
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> {
    let cursor = Cursor {
        state,
        key,
        target,
        run,
        options,
        follow,
        next: None,
        sent: 0,
    };
    stream::unfold(cursor, |mut cursor| async move {
        let chunk = cursor.chunk().await?;
        Some((Ok(Bytes::from(chunk)), cursor))
    })
}

impl Cursor {
    /// The next chunk of lines, waiting for them when following; `None` at the end.
    async fn chunk(&mut self) -> Option<String> {
        loop {
            let now = Utc::now();
            let next = *self
                .next
                .get_or_insert_with(|| self.run.first(&self.options, now));
            let count = self.run.count(now);
            if next < count {
                return self.render(next, count.min(next + BATCH), now);
            }
            if !self.follow {
                return None;
            }
            let due = self.run.due(next, now)?;
            let wait = (due - now).to_std().unwrap_or_default();
            tokio::time::sleep(wait).await;
            self.refresh()?;
        }
    }

    fn render(&mut self, from: u64, to: u64, now: DateTime<Utc>) -> Option<String> {
        let limit = self.options.limit_bytes.unwrap_or(u64::MAX);
        if self.sent >= limit {
            return None;
        }
        let mut chunk = String::new();
        for index in from..to {
            let (at, text) = self.run.line(index, now);
            chunk.push_str(&render(at, &text, self.options.timestamps));
        }
        let room = (limit - self.sent) as usize;
        chunk.truncate(room.min(chunk.len()));
        self.sent += chunk.len() as u64;
        self.next = Some(to);
        Some(chunk)
    }

    /// Follows the container: its run ending adds the last line; a new
    /// run, a stopped node or a deleted pod ends the stream.
    fn refresh(&mut self) -> Option<()> {
        let pod = self
            .state
            .pods
            .store()
            .get(Some(&self.key.0), &self.key.1)?;
        if pod.metadata.uid != self.target.pod.metadata.uid
            || !self.state.fleet.get(&self.target.node)?.is_running()
        {
            return None;
        }
        let status = pod
            .status
            .as_ref()?
            .container_statuses
            .iter()
            .flatten()
            .chain(
                pod.status
                    .as_ref()?
                    .init_container_statuses
                    .iter()
                    .flatten(),
            )
            .find(|s| s.name == self.target.container.name)
            .cloned();
        let (started, finished) = current(status.as_ref())?;
        if started != self.run.started {
            return None;
        }
        self.run.finished = finished;
        Some(())
    }
}
