//! Every pod of the cluster as a watch shows it, read as it streams: how
//! many are Ready over time (the ramp's curve), each pod's startup latency
//! (creation to Ready, in the phase it became Ready), which pods may be
//! deleted by the churn, and the most live pods any Deployment ever had
//! (more than its replicas would be a double creation).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use hdrhistogram::Histogram;
use http_body_util::BodyExt;
use serde::Deserialize;

use crate::watch_stream::{self, EventLines};

/// What the watch knows, shared with the phases that read it.
pub type Shared = Arc<Mutex<Tracker>>;

/// One pod as the watch last showed it.
struct PodState {
    deployment: Arc<str>,
    seen: Instant,
    ready: bool,
    live: bool,
    counted: bool,
}

/// Startup latencies of the pods that became Ready during one phase.
pub struct Startup {
    /// From the pod's first event at the bench to the event showing it
    /// Ready (milliseconds; the watch's own delay is in both ends).
    pub watched: Histogram<u64>,
    /// From the pod's creationTimestamp to its Ready condition's
    /// lastTransitionTime (milliseconds; the timestamps have the
    /// resolution the server writes).
    pub stamped: Histogram<u64>,
}

impl Startup {
    fn new() -> Startup {
        let histogram = || Histogram::new_with_bounds(1, 3_600_000, 3).expect("valid bounds");
        Startup {
            watched: histogram(),
            stamped: histogram(),
        }
    }
}

pub struct Tracker {
    pods: HashMap<String, PodState>,
    ready: usize,
    live_per_deployment: HashMap<Arc<str>, usize>,
    /// The most live (not terminating) pods each Deployment had at once.
    pub most_live: HashMap<Arc<str>, usize>,
    /// The phase pods becoming Ready now count in.
    pub phase: usize,
    pub startup: Vec<Startup>,
    /// (seconds since the run started, Ready pods), at every change of
    /// at least a second's worth.
    pub ready_series: Vec<(f64, usize)>,
    started: Instant,
    resource_version: String,
}

impl Tracker {
    pub fn new(started: Instant) -> Shared {
        Arc::new(Mutex::new(Tracker {
            pods: HashMap::new(),
            ready: 0,
            live_per_deployment: HashMap::new(),
            most_live: HashMap::new(),
            phase: 0,
            startup: Vec::new(),
            ready_series: vec![(0.0, 0)],
            started,
            resource_version: String::new(),
        }))
    }

    pub fn ready(&self) -> usize {
        self.ready
    }

    /// Pods that exist, terminating ones included.
    pub fn pods(&self) -> usize {
        self.pods.len()
    }

    /// The startup latencies of `phase` (empty if none became Ready).
    pub fn startup_of(&mut self, phase: usize) -> &Startup {
        while self.startup.len() <= phase {
            self.startup.push(Startup::new());
        }
        &self.startup[phase]
    }

    /// Up to `count` Ready, live pods (`namespace/name`), spread over the
    /// cluster: every `step`-th from a moving offset.
    pub fn pick_ready(&self, count: usize, offset: usize) -> Vec<String> {
        let ready: Vec<&String> = self
            .pods
            .iter()
            .filter(|(_, pod)| pod.ready && pod.live)
            .map(|(key, _)| key)
            .collect();
        if ready.is_empty() {
            return Vec::new();
        }
        let step = (ready.len() / count.max(1)).max(1);
        (0..count.min(ready.len()))
            .map(|i| ready[(offset + i * step) % ready.len()].clone())
            .collect()
    }

    fn apply(&mut self, event: Event) -> Result<(), String> {
        if event.kind == "ERROR" {
            return Err(format!(
                "the watch sent an error: {:?}",
                event.object.metadata.name
            ));
        }
        if event.kind == "BOOKMARK" {
            return Ok(());
        }
        let meta = &event.object.metadata;
        if let Some(version) = &meta.resource_version {
            self.resource_version.clone_from(version);
        }
        let key = format!("{}/{}", meta.namespace, meta.name);
        if event.kind == "DELETED" {
            if let Some(old) = self.pods.remove(&key) {
                self.forget(&old);
            }
            return Ok(());
        }
        self.upsert(key, &event.object);
        Ok(())
    }

    fn upsert(&mut self, key: String, pod: &Pod) {
        let ready = pod.ready_since().is_some();
        // Live as a ReplicaSet counts its pods: not terminating, not finished.
        let finished = matches!(pod.status.phase.as_str(), "Failed" | "Succeeded");
        let live = pod.metadata.deletion_timestamp.is_none() && !finished;
        let deployment: Arc<str> = Arc::from(pod.metadata.labels.deployment.as_str());
        let state = self.pods.entry(key).or_insert_with(|| PodState {
            deployment,
            seen: Instant::now(),
            ready: false,
            live: false,
            counted: false,
        });
        let (was_ready, was_live) = (state.ready, state.live);
        let first_ready = ready && !state.counted;
        state.ready = ready;
        state.live = live;
        state.counted |= ready;
        let seen = state.seen;
        let deployment = state.deployment.clone();
        // Ready counts while the pod is not terminating.
        let (counts, counted) = (ready && live, was_ready && was_live);
        if counts != counted {
            if counts {
                self.ready += 1;
            } else {
                self.ready -= 1;
            }
            self.note_ready_count();
        }
        if live != was_live {
            let count = self
                .live_per_deployment
                .entry(deployment.clone())
                .or_default();
            if live {
                *count += 1;
            } else {
                *count = count.saturating_sub(1);
            }
            let most = self.most_live.entry(deployment).or_default();
            *most = (*most).max(*count);
        }
        if first_ready {
            self.record_startup(seen, pod);
        }
    }

    fn forget(&mut self, old: &PodState) {
        if old.ready && old.live {
            self.ready -= 1;
            self.note_ready_count();
        }
        if old.live {
            if let Some(count) = self.live_per_deployment.get_mut(&old.deployment) {
                *count = count.saturating_sub(1);
            }
        }
    }

    fn record_startup(&mut self, seen: Instant, pod: &Pod) {
        let watched = seen.elapsed().as_millis().max(1) as u64;
        let stamped = pod.stamped_startup();
        let phase = self.phase;
        let startup = {
            self.startup_of(phase);
            &mut self.startup[phase]
        };
        startup.watched.saturating_record(watched);
        if let Some(stamped) = stamped {
            startup
                .stamped
                .saturating_record(stamped.as_millis().max(1) as u64);
        }
    }

    fn note_ready_count(&mut self) {
        let now = self.started.elapsed().as_secs_f64();
        match self.ready_series.last_mut() {
            Some(last) if now - last.0 < 0.5 => last.1 = self.ready,
            _ => self.ready_series.push((now, self.ready)),
        }
    }
}

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    object: Pod,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Pod {
    metadata: Meta,
    status: Status,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Meta {
    name: String,
    namespace: String,
    resource_version: Option<String>,
    creation_timestamp: Option<String>,
    deletion_timestamp: Option<String>,
    labels: Labels,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Labels {
    deployment: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Status {
    phase: String,
    conditions: Vec<Condition>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Condition {
    #[serde(rename = "type")]
    kind: String,
    status: String,
    last_transition_time: Option<String>,
}

impl Pod {
    /// When the pod became Ready ("" when the condition has no time), if it is.
    fn ready_since(&self) -> Option<&str> {
        self.status
            .conditions
            .iter()
            .find(|c| c.kind == "Ready" && c.status == "True")
            .map(|c| c.last_transition_time.as_deref().unwrap_or(""))
    }

    /// creationTimestamp to the Ready condition's lastTransitionTime.
    fn stamped_startup(&self) -> Option<Duration> {
        let parse = |text: &str| humantime::parse_rfc3339_weak(text).ok();
        let created: SystemTime = parse(self.metadata.creation_timestamp.as_deref()?)?;
        let ready: SystemTime = parse(self.ready_since()?)?;
        Some(ready.duration_since(created).unwrap_or_default())
    }
}

/// Watches every pod on the plain port, from the tracker's last
/// resourceVersion, until `stop` is set; reopens a watch the server ends.
pub async fn follow(
    port: u16,
    tracker: Shared,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Result<(), String> {
    use std::sync::atomic::Ordering;
    while !stop.load(Ordering::Relaxed) {
        let version = tracker.lock().expect("tracker").resource_version.clone();
        let body = open(port, &version).await?;
        match tokio::time::timeout(Duration::from_secs(3600), read(body, &tracker, &stop)).await {
            Ok(result) => result?,
            Err(_) => continue,
        }
    }
    Ok(())
}

/// Every pod's watch from `version` (the start when empty), with bookmarks.
async fn open(port: u16, version: &str) -> Result<hyper::body::Incoming, String> {
    let from = match version {
        "" => String::new(),
        version => format!("&resourceVersion={version}"),
    };
    let path = format!("/api/v1/pods?watch=true&allowWatchBookmarks=true{from}");
    watch_stream::open(port, &path).await
}

async fn read(
    mut body: hyper::body::Incoming,
    tracker: &Shared,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<(), String> {
    let mut lines = EventLines::default();
    while let Some(frame) = body.frame().await {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(());
        }
        // A broken watch is reopened from the last version seen.
        let Ok(frame) = frame else { return Ok(()) };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let events = lines
            .push(&data)?
            .iter()
            .map(|line| serde_json::from_slice::<Event>(line))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("a pods watch event that is not JSON: {e}"))?;
        let mut tracker = tracker.lock().expect("tracker");
        for event in events {
            tracker.apply(event)?;
        }
        drop(tracker);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, name: &str, ready: bool, deleting: bool) -> Event {
        let conditions = if ready {
            r#"[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T00:00:03Z"}]"#
        } else {
            "[]"
        };
        let deletion = if deleting {
            r#","deletionTimestamp":"2026-01-01T00:00:09Z""#
        } else {
            ""
        };
        let text = format!(
            r#"{{"type":"{kind}","object":{{"metadata":{{"name":"{name}","namespace":"n",
            "resourceVersion":"7","creationTimestamp":"2026-01-01T00:00:01Z",
            "labels":{{"deployment":"d"}}{deletion}}},"status":{{"conditions":{conditions}}}}}}}"#
        );
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn counts_ready_pods_and_their_startup() {
        let shared = Tracker::new(Instant::now());
        let mut tracker = shared.lock().unwrap();
        tracker.apply(event("ADDED", "a", false, false)).unwrap();
        tracker.apply(event("MODIFIED", "a", true, false)).unwrap();
        tracker.apply(event("ADDED", "b", true, false)).unwrap();
        assert_eq!(tracker.ready(), 2);
        assert_eq!(tracker.startup_of(0).stamped.len(), 2);
        assert_eq!(tracker.startup_of(0).stamped.value_at_quantile(1.0), 2000);
        assert_eq!(tracker.pick_ready(5, 0).len(), 2);
        let mut failed = event("ADDED", "c", false, false);
        failed.object.status.phase = "Failed".into();
        tracker.apply(failed).unwrap();
        assert_eq!(tracker.live_per_deployment[&Arc::<str>::from("d")], 2);
        tracker.apply(event("MODIFIED", "a", true, true)).unwrap();
        assert_eq!(tracker.pick_ready(5, 0), vec!["n/b".to_string()]);
        assert_eq!(tracker.ready(), 1);
        tracker.apply(event("DELETED", "a", true, true)).unwrap();
        assert_eq!(tracker.ready(), 1);
        assert_eq!(tracker.pods(), 2);
        assert_eq!(tracker.most_live[&Arc::<str>::from("d")], 2);
        assert_eq!(tracker.resource_version, "7");
    }
}
