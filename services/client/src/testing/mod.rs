//! An in-memory Kubernetes API for unit tests: a tower service answering
//! the REST API from memory, handed to `kube::Client::new`, so anything
//! written against `kube::Client` (informers, reconcile functions, leader
//! election, event recording) runs without processes.
//!
//! Objects are kept as JSON by (group, resource), so it works for any
//! type, built-in or custom. It does what kube-apiserver does for every
//! type — get, list and watch with label and field selectors (watch
//! from a resourceVersion, bookmarks, 410 for a compacted one); create
//! (generateName, uid, creationTimestamp, generation, AlreadyExists);
//! update and patch (merge, JSON, strategic; Conflict on a stale
//! resourceVersion; status only through `/status`); delete (finalizers,
//! preconditions, pods' graceful deletion); `pods/binding`,
//! `pods/eviction` and any object's `scale` — and no type-specific validation or defaulting,
//! admission, authorization, garbage collection or namespace checks.
//!
//! For tests it adds failure injection ([`FakeApi::fail_next`]), watch
//! delays ([`FakeApi::set_watch_delay`]), dropped watches and compaction,
//! and a log of the calls made ([`FakeApi::calls`]).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use capstan_client::testing::FakeApi;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams};
//!
//! let fake = FakeApi::new();
//! let api: Api<ConfigMap> = Api::namespaced(fake.client(), "default");
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("settings".into());
//! api.create(&PostParams::default(), &cm).await.unwrap();
//! assert!(fake.get::<ConfigMap>(Some("default"), "settings").is_some());
//! # }
//! ```

mod deletes;
mod objects;
mod patch;
mod request;
mod scale;
mod selectors;
mod service;
mod status;
mod watch;
mod writes;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use http_body_util::BodyExt;
use kube::client::Body;
use kube::Resource;
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use tower::util::BoxCloneSyncService;
use tower::BoxError;

pub use request::Verb;
pub use status::ApiError;

use crate::connect::{ClientSettings, Connection, ResponseBody, Transport};
use objects::{ChangeType, Objects};
use watch::Watchers;

/// One request the in-memory API received.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// The verb.
    pub verb: Verb,
    /// The API group ("" for the core group).
    pub group: String,
    /// The plural resource (`pods`).
    pub resource: String,
    /// The subresource (`status`, `binding`).
    pub subresource: Option<String>,
    /// The namespace in the path.
    pub namespace: Option<String>,
    /// The object's name in the path.
    pub name: Option<String>,
    /// `Impersonate-User`, if sent.
    pub user: Option<String>,
    /// `Impersonate-Group` values.
    pub groups: Vec<String>,
    /// `User-Agent`.
    pub user_agent: Option<String>,
    /// The body of a write, as JSON (`None` when empty or not JSON).
    pub body: Option<Value>,
}

impl Call {
    fn of(request: &request::ApiRequest, body: &[u8]) -> Call {
        Call {
            verb: request.verb,
            group: request.group.clone(),
            resource: request.resource.clone(),
            subresource: request.subresource.clone(),
            namespace: request.namespace.clone(),
            name: request.name.clone(),
            user: request.user.clone(),
            groups: request.groups.clone(),
            user_agent: request.user_agent.clone(),
            body: serde_json::from_slice(body).ok(),
        }
    }

    /// `resource` or `resource/subresource`.
    pub fn resource_path(&self) -> String {
        match &self.subresource {
            Some(sub) => format!("{}/{sub}", self.resource),
            None => self.resource.clone(),
        }
    }
}

/// Failures queued by [`FakeApi::fail_next`].
#[derive(Default)]
struct Faults {
    queued: Vec<(Verb, String, usize, ApiError)>,
}

impl Faults {
    fn take(&mut self, verb: Verb, resource: &str) -> Option<ApiError> {
        let position = self
            .queued
            .iter()
            .position(|(v, r, n, _)| *v == verb && r == resource && *n > 0)?;
        let entry = &mut self.queued[position];
        entry.2 -= 1;
        let failure = entry.3.clone();
        if entry.2 == 0 {
            self.queued.remove(position);
        }
        Some(failure)
    }
}

struct State {
    objects: Objects,
    watchers: Watchers,
    faults: Faults,
    calls: Vec<Call>,
    watch_delays: HashMap<String, Duration>,
    bookmark_interval: Duration,
}

/// The in-memory API. Clones share it.
#[derive(Clone)]
pub struct FakeApi {
    state: Arc<Mutex<State>>,
}

impl Default for FakeApi {
    fn default() -> Self {
        FakeApi::new()
    }
}

impl FakeApi {
    /// An empty API.
    pub fn new() -> FakeApi {
        FakeApi {
            state: Arc::new(Mutex::new(State {
                objects: Objects::new(),
                watchers: Watchers::default(),
                faults: Faults::default(),
                calls: Vec::new(),
                watch_delays: HashMap::new(),
                bookmark_interval: Duration::from_secs(5),
            })),
        }
    }

    /// A client of this API (default namespace `default`).
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.clone(), "default")
    }

    /// This API as a [`Transport`], for [`Connection::over`].
    pub fn transport(&self) -> Transport {
        BoxCloneSyncService::new(self.clone())
    }

    /// A [`Connection`] to this API with no rate limit, for code that
    /// takes one (impersonating clients, user agents).
    pub fn connection(&self, component: &str) -> Connection {
        let settings = ClientSettings {
            kube_api_qps: 0.0,
            ..ClientSettings::default()
        };
        Connection::over(self.transport(), "default".into(), &settings, component)
            .expect("a component name that is a valid header")
    }

    /// Stores `object` as given, status included (test setup that skips
    /// the API's rules), with a uid and creationTimestamp if it has none
    /// and the next resourceVersion; watches see it. Returns it stored.
    pub fn insert<K>(&self, object: &K) -> K
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    {
        let mut value = serde_json::to_value(object).expect("a serializable object");
        value["apiVersion"] = Value::String(K::api_version(&()).into_owned());
        value["kind"] = Value::String(K::kind(&()).into_owned());
        let meta = &mut value["metadata"];
        if meta["uid"].is_null() {
            meta["uid"] = Value::String(uuid::Uuid::new_v4().to_string());
        }
        if meta["creationTimestamp"].is_null() {
            meta["creationTimestamp"] = Value::String(k8s_openapi::chrono::Utc::now().to_rfc3339());
        }
        let name = meta["name"].as_str().unwrap_or_default().to_string();
        let key = objects::key(meta["namespace"].as_str(), &name);
        let collection = (K::group(&()).into_owned(), K::plural(&()).into_owned());
        let mut state = self.state.lock();
        let existed = state.objects.get(&collection, &key).is_some();
        let change = if existed {
            ChangeType::Modified
        } else {
            ChangeType::Added
        };
        let change = state.objects.put(&collection, &key, value, change);
        state.watchers.notify(&change);
        serde_json::from_value(change.object.clone()).expect("the object just stored")
    }

    /// The stored object, if any.
    pub fn get<K>(&self, namespace: Option<&str>, name: &str) -> Option<K>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let collection = (K::group(&()).into_owned(), K::plural(&()).into_owned());
        let state = self.state.lock();
        let value = state
            .objects
            .get(&collection, &objects::key(namespace, name))?;
        Some(serde_json::from_value(value.clone()).expect("a stored object of this type"))
    }

    /// Every stored object of type `K`.
    pub fn list<K>(&self) -> Vec<K>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let collection = (K::group(&()).into_owned(), K::plural(&()).into_owned());
        let state = self.state.lock();
        state
            .objects
            .list(&collection, None, &selectors::Selectors::default())
            .into_iter()
            .map(|v| serde_json::from_value(v).expect("a stored object of this type"))
            .collect()
    }

    /// The latest resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.state.lock().objects.resource_version()
    }

    /// Makes the next `times` requests of `verb` on `resource` (a plural
    /// such as `pods`, or `pods/binding` for a subresource) fail with
    /// `failure` instead of being served.
    pub fn fail_next(&self, verb: Verb, resource: &str, times: usize, failure: ApiError) {
        self.state
            .lock()
            .faults
            .queued
            .push((verb, resource.to_string(), times, failure));
    }

    /// Delays every event of watches on `resource` opened from now on by
    /// `delay` (a lagging cache, for expectations tests).
    pub fn set_watch_delay(&self, resource: &str, delay: Duration) {
        self.state
            .lock()
            .watch_delays
            .insert(resource.to_string(), delay);
    }

    /// How often watches that allow bookmarks get one (default 5 s).
    pub fn set_bookmark_interval(&self, interval: Duration) {
        self.state.lock().bookmark_interval = interval;
    }

    /// Forgets the change history: a watch from any older version gets
    /// 410 Gone, so clients must relist.
    pub fn compact(&self) {
        self.state.lock().objects.compact();
    }

    /// Ends every open watch, as a dropped connection would.
    pub fn close_watches(&self) {
        self.state.lock().watchers.close_all();
    }

    /// How many watches are open.
    pub fn open_watches(&self) -> usize {
        self.state.lock().watchers.count()
    }

    /// The calls received so far, oldest first.
    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().calls.clone()
    }

    /// The calls of `verb` on `resource` (`pods`, `pods/binding`).
    pub fn calls_to(&self, verb: Verb, resource: &str) -> Vec<Call> {
        self.state
            .lock()
            .calls
            .iter()
            .filter(|c| c.verb == verb && c.resource_path() == resource)
            .cloned()
            .collect()
    }

    /// Forgets the calls logged so far.
    pub fn clear_calls(&self) {
        self.state.lock().calls.clear();
    }
}

impl tower::Service<Request<Body>> for FakeApi {
    type Response = Response<ResponseBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let state = self.state.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let bytes = body.collect().await?.to_bytes();
            let request = Request::from_parts(parts, ());
            let mut state = state.lock();
            Ok(service::handle(&mut state, &request, &bytes))
        })
    }
}

#[cfg(test)]
mod tests;
