//! Connections over the in-memory API: rate limits and identities.
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use tokio::time::Instant;

use super::*;
use crate::testing::{FakeApi, Verb};

async fn get(client: &kube::Client) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.get_opt("x").await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn every_identity_draws_from_the_connections_one_bucket() {
    let fake = FakeApi::new();
    let settings = ClientSettings {
        kube_api_qps: 10.0,
        kube_api_burst: 2,
        kubeconfig: None,
    };
    let connection = Connection::over(fake.transport(), "default".into(), &settings, "t").unwrap();
    let own = connection.client();
    let node = connection
        .impersonating("system:node:n1", &["system:nodes"])
        .unwrap();
    let start = Instant::now();
    for client in [&own, &node, &own, &node] {
        get(client).await;
    }
    // Two from the burst, then one every 100 ms.
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_millis(250),
        "{took:?}"
    );
    let calls = fake.calls_to(Verb::Get, "configmaps");
    let users: Vec<_> = calls.iter().map(|c| c.user.as_deref()).collect();
    assert_eq!(
        users,
        [None, Some("system:node:n1"), None, Some("system:node:n1")]
    );
}

#[tokio::test(start_paused = true)]
async fn zero_qps_means_unlimited() {
    let fake = FakeApi::new();
    let client = fake.connection("t").client();
    let start = Instant::now();
    for _ in 0..100 {
        get(&client).await;
    }
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test]
async fn a_header_that_cannot_be_sent_is_refused() {
    let fake = FakeApi::new();
    let Err(err) = fake.connection("t").impersonating("bad\nuser", &[]) else {
        panic!("a newline in a header was accepted");
    };
    assert!(
        err.to_string().contains("cannot be sent in a header"),
        "{err}"
    );
}

#[tokio::test]
async fn settings_without_a_kubeconfig_are_refused() {
    let err = Connection::from_settings(&ClientSettings::default(), "t")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no --kubeconfig"), "{err}");
}
