//! A Kubernetes traffic profile through API servers, recorded as a
//! history: kube-rs clients creating, reading, updating with a
//! resourceVersion, merge-patching, deleting and listing a few ConfigMaps,
//! and REST watchers collecting their events across reconnects.
//!
//! Each ConfigMap is a register whose value is `data.v`, which no two
//! writes share; so an update with resourceVersion R (the version a read
//! saw with value v) is a compare-and-swap from v, a create is one from
//! absent, and a list is a read of every name at once. A 409 or 404 is a
//! definite answer; other errors are read as `answers` says (only no
//! answer, 503, 504 and 429 leave the outcome unknown; the rest are
//! failures of the run). A delete's answer carries the deletion's
//! resourceVersion, so the REST watch checks hold deletions too.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::{Api, Client};
use serde_json::json;

use crate::answers;
use crate::checker::watch::{Event, Kind, Write};
use crate::history::{Input, Output, Recorder};

/// The traffic's ConfigMaps are named `f-<n>`; anything else is ignored.
pub const PREFIX: &str = "f-";
const NAMES: usize = 5;
const BACKOFF: Duration = Duration::from_millis(100);
/// How long each REST watch runs before the server ends it.
const WATCH_SECONDS: u32 = 8;

#[derive(Default)]
pub struct KubeTraffic {
    pub recorder: Recorder,
    pub acked: Mutex<Vec<Write>>,
    pub issued: Mutex<HashSet<String>>,
    /// Answers that were failures of the server (see `answers`).
    pub errors: Mutex<Vec<String>>,
    pub stop: AtomicBool,
}

impl KubeTraffic {
    /// What client `id` was told by an error to `what`: unknown, or that
    /// it did not happen (a failure of the server, which is noted).
    fn judge(&self, id: usize, what: &str, err: &kube::Error) -> Output {
        let note = || format!("client {id}: {what}: {err}");
        answers::outcome(answers::kube(err), &self.errors, note)
    }
}

/// ConfigMaps in `default` through the API server on `port`, with
/// timeouts so a stuck request ends as an ambiguous outcome.
pub fn configmaps(port: u16) -> Api<ConfigMap> {
    let mut config = crate::tls::kube_config(port);
    config.connect_timeout = Some(Duration::from_secs(3));
    config.read_timeout = Some(Duration::from_secs(15));
    config.write_timeout = Some(Duration::from_secs(5));
    Api::default_namespaced(Client::try_from(config).expect("a kube client"))
}

pub fn configmap(name: &str, value: &str, resource_version: Option<String>) -> ConfigMap {
    let mut cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": name},
        "data": {"v": value},
    }))
    .expect("a ConfigMap");
    cm.metadata.resource_version = resource_version;
    cm
}

fn value_of(cm: &ConfigMap) -> Option<String> {
    cm.data.as_ref()?.get("v").cloned()
}

fn revision_of(cm: &ConfigMap) -> Option<i64> {
    cm.metadata.resource_version.as_ref()?.parse().ok()
}

/// The HTTP status of an API error (None: no answer, or not an API error).
fn status(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(response) => Some(response.code),
        _ => None,
    }
}

/// One client's loop until `traffic.stop`, switching API server after a
/// failure.
pub async fn client(id: usize, ports: Vec<u16>, traffic: Arc<KubeTraffic>) {
    let mut rng = id as u64 * 0x2545_f491_4f6c_dd1d + 0x9e37_79b9;
    let mut seen: Vec<Option<(String, String)>> = vec![None; NAMES];
    let (mut seq, mut server) = (0usize, id);
    while !traffic.stop.load(Ordering::Relaxed) {
        server = (server + 1) % ports.len();
        let api = configmaps(ports[server]);
        while !traffic.stop.load(Ordering::Relaxed) {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            seq += 1;
            let n = (rng % NAMES as u64) as usize;
            let op = KubeOp {
                id,
                name: format!("{PREFIX}{n}"),
                value: format!("c{id}-{seq}"),
                api: &api,
                traffic: &traffic,
            };
            let answered = match (rng >> 32) % 100 {
                0..=19 => op.create().await,
                20..=39 => op.get(&mut seen[n]).await,
                40..=54 => op.update(seen[n].clone()).await,
                55..=69 => op.patch().await,
                70..=79 => op.delete().await,
                _ => op.list().await,
            };
            if !answered {
                tokio::time::sleep(BACKOFF).await;
                break;
            }
        }
    }
}

struct KubeOp<'a> {
    id: usize,
    name: String,
    value: String,
    api: &'a Api<ConfigMap>,
    traffic: &'a KubeTraffic,
}

impl KubeOp<'_> {
    fn now(&self) -> u64 {
        self.traffic.recorder.now()
    }

    /// Records the outcome of a write of `self.value` (of a deletion
    /// when `written` is what a delete returned); whether answered.
    fn record_write(
        &self,
        input: Input,
        call: u64,
        output: Output,
        written: Option<&ConfigMap>,
    ) -> bool {
        let revision = written.and_then(revision_of);
        if let Some(revision) = revision {
            let (kind, value) = match input {
                Input::Delete => (Kind::Delete, None),
                _ => (Kind::Put, Some(self.value.clone())),
            };
            self.traffic.acked.lock().unwrap().push(Write {
                revision,
                key: self.name.clone(),
                kind,
                value,
            });
        }
        let answered = output != Output::Unknown;
        let recorder = &self.traffic.recorder;
        recorder.record(self.id, &self.name, input, call, (output, revision));
        answered
    }

    fn issue(&self) {
        self.traffic
            .issued
            .lock()
            .unwrap()
            .insert(self.value.clone());
    }

    async fn create(&self) -> bool {
        self.issue();
        let input = Input::Cas {
            expect: None,
            value: self.value.clone(),
        };
        let call = self.now();
        let cm = configmap(&self.name, &self.value, None);
        match self.api.create(&PostParams::default(), &cm).await {
            Ok(cm) => self.record_write(input, call, Output::Cas { succeeded: true }, Some(&cm)),
            Err(e) if status(&e) == Some(409) => {
                self.record_write(input, call, Output::Cas { succeeded: false }, None)
            }
            Err(e) => {
                let output = self
                    .traffic
                    .judge(self.id, &format!("create {}", self.name), &e);
                self.record_write(input, call, output, None)
            }
        }
    }

    /// A read; remembers the value and resourceVersion for an update.
    async fn get(&self, seen: &mut Option<(String, String)>) -> bool {
        let call = self.now();
        let value = match self.api.get(&self.name).await {
            Ok(cm) => {
                *seen = value_of(&cm).zip(cm.metadata.resource_version.clone());
                value_of(&cm)
            }
            Err(e) if status(&e) == Some(404) => None,
            Err(e) => {
                self.traffic
                    .judge(self.id, &format!("get {}", self.name), &e);
                return false;
            }
        };
        let recorder = &self.traffic.recorder;
        recorder.record(
            self.id,
            &self.name,
            Input::Get,
            call,
            (Output::Get(value), None),
        );
        true
    }

    /// A replace carrying the resourceVersion a read saw.
    async fn update(&self, seen: Option<(String, String)>) -> bool {
        let Some((expect, resource_version)) = seen else {
            return true;
        };
        self.issue();
        let input = Input::Cas {
            expect: Some(expect),
            value: self.value.clone(),
        };
        let call = self.now();
        let cm = configmap(&self.name, &self.value, Some(resource_version));
        match self
            .api
            .replace(&self.name, &PostParams::default(), &cm)
            .await
        {
            Ok(cm) => self.record_write(input, call, Output::Cas { succeeded: true }, Some(&cm)),
            Err(e) if matches!(status(&e), Some(409 | 404)) => {
                self.record_write(input, call, Output::Cas { succeeded: false }, None)
            }
            Err(e) => {
                let output = self
                    .traffic
                    .judge(self.id, &format!("update {}", self.name), &e);
                self.record_write(input, call, output, None)
            }
        }
    }

    async fn patch(&self) -> bool {
        self.issue();
        let input = Input::Patch {
            value: self.value.clone(),
        };
        let call = self.now();
        let patch = Patch::Merge(json!({"data": {"v": self.value}}));
        match self
            .api
            .patch(&self.name, &PatchParams::default(), &patch)
            .await
        {
            Ok(cm) => self.record_write(input, call, Output::Patch { found: true }, Some(&cm)),
            Err(e) if status(&e) == Some(404) => {
                self.record_write(input, call, Output::Patch { found: false }, None)
            }
            Err(e) => {
                let output = self
                    .traffic
                    .judge(self.id, &format!("patch {}", self.name), &e);
                self.record_write(input, call, output, None)
            }
        }
    }

    async fn delete(&self) -> bool {
        let call = self.now();
        let (output, gone) = match self.api.delete(&self.name, &DeleteParams::default()).await {
            // The object as it was, at the deletion's resourceVersion.
            Ok(answer) => (Output::Delete { deleted: true }, answer.left()),
            Err(e) if status(&e) == Some(404) => (Output::Delete { deleted: false }, None),
            Err(e) => {
                let what = format!("delete {}", self.name);
                (self.traffic.judge(self.id, &what, &e), None)
            }
        };
        self.record_write(Input::Delete, call, output, gone.as_ref())
    }

    /// A list is a read of every name at one revision.
    async fn list(&self) -> bool {
        let call = self.now();
        let list = match self.api.list(&ListParams::default()).await {
            Ok(list) => list,
            Err(e) => {
                self.traffic.judge(self.id, "list", &e);
                return false;
            }
        };
        record_list(&self.traffic.recorder, self.id, call, &list.items);
        true
    }
}

/// Records a list answered at some time after `call` as one read per name.
pub fn record_list(recorder: &Recorder, client: usize, call: u64, items: &[ConfigMap]) {
    let values: BTreeMap<String, Option<String>> = items
        .iter()
        .filter_map(|cm| Some((cm.metadata.name.clone()?, value_of(cm))))
        .collect();
    for n in 0..NAMES {
        let name = format!("{PREFIX}{n}");
        let value = values.get(&name).cloned().flatten();
        recorder.record(client, &name, Input::Get, call, (Output::Get(value), None));
    }
}

/// A REST watcher: events of the traffic's ConfigMaps after a
/// resourceVersion, resumed from the last one seen (event or bookmark)
/// on the next API server whenever the stream ends (each watch asks the
/// server to end it after a few seconds, so resumption across API servers
/// happens often), until one at `until` or later.
#[derive(Default)]
pub struct RestWatcher {
    pub events: Mutex<Vec<Event>>,
    pub until: AtomicI64,
    pub opened: AtomicUsize,
    pub bookmarks: AtomicUsize,
    /// Broken promises seen on the wire: a bookmark behind an event, an
    /// ERROR event, a resumption every API server refused.
    pub problems: Mutex<Vec<String>>,
    /// Resumptions one API server refused as too old (410), which is
    /// lawful when its watch cache starts later (say it just restarted);
    /// the watcher then resumes on the next one.
    pub refused: Mutex<Vec<String>>,
}

impl RestWatcher {
    fn done(&self, last: i64) -> bool {
        let until = self.until.load(Ordering::Relaxed);
        until > 0 && last >= until
    }

    pub async fn run(self: Arc<Self>, ports: Vec<u16>, first: usize, after: i64) {
        let mut last = after;
        let mut server = first;
        let mut line = 0u64;
        let mut refusals = 0;
        while !self.done(last) {
            let api = configmaps(ports[server % ports.len()]);
            server += 1;
            let params = WatchParams::default().timeout(WATCH_SECONDS);
            let Ok(stream) = api.watch(&params, &last.to_string()).await else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            self.opened.fetch_add(1, Ordering::Relaxed);
            let mut stream = Box::pin(stream);
            loop {
                match tokio::time::timeout(Duration::from_secs(1), stream.next()).await {
                    Ok(Some(Ok(event))) => {
                        line += 1;
                        match self.take(event, line, &mut last) {
                            Next::Continue => refusals = 0,
                            Next::Reopen => break,
                            Next::TooOld if refusals + 1 < ports.len() => {
                                refusals += 1;
                                break;
                            }
                            // No server can resume it; the checks report
                            // what is missing.
                            Next::TooOld => {
                                let problem = format!("every API server refused {last}");
                                self.problems.lock().unwrap().push(problem);
                                return;
                            }
                        }
                    }
                    Ok(_) => break,
                    Err(_) => {}
                }
                if self.done(last) {
                    return;
                }
            }
        }
    }

    /// Stores one event and advances `last`.
    fn take(&self, event: WatchEvent<ConfigMap>, line: u64, last: &mut i64) -> Next {
        let (cm, kind) = match event {
            WatchEvent::Added(cm) | WatchEvent::Modified(cm) => (cm, Kind::Put),
            WatchEvent::Deleted(cm) => (cm, Kind::Delete),
            WatchEvent::Bookmark(bookmark) => {
                let revision: i64 = bookmark.metadata.resource_version.parse().unwrap_or(0);
                if revision < *last {
                    let problem = format!("bookmark at {revision} after an event at {last}");
                    self.problems.lock().unwrap().push(problem);
                }
                *last = (*last).max(revision);
                self.bookmarks.fetch_add(1, Ordering::Relaxed);
                return Next::Continue;
            }
            WatchEvent::Error(error) => {
                let problem = format!("watch from {last}: {} {}", error.code, error.message);
                if error.code == 410 {
                    self.refused.lock().unwrap().push(problem);
                    return Next::TooOld;
                }
                self.problems.lock().unwrap().push(problem);
                return Next::Reopen;
            }
        };
        let Some(revision) = revision_of(&cm) else {
            return Next::Continue;
        };
        *last = revision;
        let name = cm.metadata.name.clone().unwrap_or_default();
        if name.starts_with(PREFIX) {
            self.events.lock().unwrap().push(Event {
                revision,
                key: name,
                kind,
                value: (kind == Kind::Put).then(|| value_of(&cm)).flatten(),
                response: line,
            });
        }
        Next::Continue
    }
}

enum Next {
    Continue,
    Reopen,
    /// 410 Gone: this server cannot resume from so far back.
    TooOld,
}
