//! Unit-test plumbing: a context on the in-memory API, objects from
//! JSON, and waiting for a condition without timing assumptions beyond a
//! generous deadline.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use capstan_client::informer::Informers;
use capstan_client::testing::FakeApi;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::context::Context;
use crate::identity::Clients;

/// A context on `fake` with kube's default settings and one identity.
pub fn context(fake: &FakeApi) -> Arc<Context> {
    let connection = fake.connection("kube-controller-manager");
    let settings = Settings {
        leader_elect: false,
        secure_port: 0,
        use_service_account_credentials: false,
        ..Settings::defaults()
    };
    Arc::new(Context {
        informers: Informers::new(fake.client()),
        settings: Arc::new(settings),
        clients: Arc::new(Clients::shared(connection)),
        stop: CancellationToken::new(),
    })
}

/// An object of type `K` from JSON.
pub fn object<K: DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("a valid object")
}

/// Waits until `check` returns Some, polling; panics naming `what` after 10 s.
pub async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
