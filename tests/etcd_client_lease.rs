//! The `etcd-client` crate against a real `capstan-store` process: leases
//! (grant, keepalive, time to live, revoke) and maintenance.

use std::time::{Duration, Instant};

use capstan_tests::client::{
    assert_grpc_error, connect, current_revision, fill_range_fixture, keys, put,
    start_store as start,
};
use capstan_tests::keyspace::read_keyspace;
use capstan_tests::poll::wait_for_async;
use capstan_tests::watch::{events_of, open_watch, summary};
use etcd_client::{
    EventType, GetOptions, LeaseGrantOptions, LeaseTimeToLiveOptions, PutOptions, WatchOptions,
};
use tonic::Code;

#[tokio::test]
async fn lease_grant_with_and_without_an_id() {
    let (_store, mut client) = start().await;
    let chosen = client
        .lease_grant(30, Some(LeaseGrantOptions::new().with_id(0x1234)))
        .await
        .unwrap();
    assert_eq!((chosen.id(), chosen.ttl()), (0x1234, 30));
    let picked = client.lease_grant(30, None).await.unwrap();
    assert!(
        picked.id() > 0 && picked.id() != 0x1234,
        "server-picked id {}",
        picked.id()
    );
    let short = client.lease_grant(1, None).await.unwrap();
    assert_eq!(short.ttl(), 2, "TTL is raised to the 2 s minimum");
    let again = client
        .lease_grant(30, Some(LeaseGrantOptions::new().with_id(0x1234)))
        .await;
    assert_grpc_error(
        again,
        Code::FailedPrecondition,
        "etcdserver: lease already exists",
    );
    let mut ids: Vec<i64> = client
        .leases()
        .await
        .unwrap()
        .leases()
        .iter()
        .map(|l| l.id())
        .collect();
    ids.sort();
    let mut expected = vec![0x1234, picked.id(), short.id()];
    expected.sort();
    assert_eq!(ids, expected);
}

#[tokio::test]
async fn lease_keep_alive_stream_keeps_keys_past_the_ttl() {
    let (_store, mut client) = start().await;
    let id = client.lease_grant(2, None).await.unwrap().id();
    client
        .put("kept", "v", Some(PutOptions::new().with_lease(id)))
        .await
        .unwrap();
    let (mut keeper, mut responses) = client.lease_keep_alive(id).await.unwrap();
    // Seven renewals half a second apart: the key outlives its 2 s TTL.
    for _ in 0..7 {
        keeper.keep_alive().await.unwrap();
        let response = tokio::time::timeout(Duration::from_secs(5), responses.message())
            .await
            .expect("keep-alive answered")
            .unwrap()
            .expect("keep-alive stream open");
        assert_eq!((response.id(), response.ttl()), (id, 2));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(
        client.get("kept", None).await.unwrap().kvs().len(),
        1,
        "kept alive past its TTL"
    );
    let before_expiry = current_revision(&mut client).await;
    let (mut watch, watch_id) = open_watch(&mut client, "kept", WatchOptions::new()).await;
    drop(keeper);
    drop(responses);
    wait_for_async(Duration::from_secs(10), "the key to expire", || {
        let mut client = client.clone();
        async move {
            client
                .get("kept", None)
                .await
                .unwrap()
                .kvs()
                .is_empty()
                .then_some(())
        }
    })
    .await;
    assert_eq!(client.lease_time_to_live(id, None).await.unwrap().ttl(), -1);
    // Expiry is a replicated delete: one new revision and a DELETE event.
    let expired = events_of(&mut watch, watch_id, 1).await;
    assert_eq!(
        summary(&expired[0]),
        (
            EventType::Delete,
            "kept".into(),
            String::new(),
            before_expiry + 1
        )
    );
    assert_eq!(current_revision(&mut client).await, before_expiry + 1);
}

#[tokio::test]
async fn lease_time_to_live_lists_attached_keys() {
    let (_store, mut client) = start().await;
    let granted_at = Instant::now();
    let id = client.lease_grant(60, None).await.unwrap().id();
    for key in ["t/2", "t/1"] {
        client
            .put(key, "v", Some(PutOptions::new().with_lease(id)))
            .await
            .unwrap();
    }
    let info = client
        .lease_time_to_live(id, Some(LeaseTimeToLiveOptions::new().with_keys()))
        .await
        .unwrap();
    assert_eq!((info.id(), info.granted_ttl()), (id, 60));
    // No more than the time since the grant has run off (plus rounding).
    let lowest = 60 - granted_at.elapsed().as_secs() as i64 - 1;
    assert!(
        (lowest..=60).contains(&info.ttl()),
        "remaining {} with at least {lowest} due",
        info.ttl()
    );
    let mut keys = info.keys().to_vec();
    keys.sort();
    assert_eq!(keys, [b"t/1".to_vec(), b"t/2".to_vec()]);
    let without = client.lease_time_to_live(id, None).await.unwrap();
    assert!(without.keys().is_empty(), "keys only on request");
    client.put("t/1", "detached", None).await.unwrap();
    let after = client
        .lease_time_to_live(id, Some(LeaseTimeToLiveOptions::new().with_keys()))
        .await
        .unwrap();
    assert_eq!(
        after.keys(),
        [b"t/2".to_vec()],
        "a plain put detaches the key"
    );
    client.delete("t/2", None).await.unwrap();
    let deleted = client
        .lease_time_to_live(id, Some(LeaseTimeToLiveOptions::new().with_keys()))
        .await
        .unwrap();
    assert!(deleted.keys().is_empty(), "a deleted key leaves its lease");
    assert_eq!(deleted.granted_ttl(), 60, "the lease itself stays");
    let missing = client.lease_time_to_live(0x7777, None).await.unwrap();
    assert_eq!(missing.ttl(), -1, "an unknown lease has TTL -1");
}

#[tokio::test]
async fn lease_revoke_deletes_every_attached_key_in_one_revision() {
    let (_store, mut client) = start().await;
    let id = client.lease_grant(60, None).await.unwrap().id();
    for key in ["l/a", "l/b", "l/c"] {
        client
            .put(key, "v", Some(PutOptions::new().with_lease(id)))
            .await
            .unwrap();
    }
    put(&mut client, "l/plain", "v").await;
    let before = current_revision(&mut client).await;
    let (mut stream, watch) =
        open_watch(&mut client, "l/", WatchOptions::new().with_prefix()).await;
    let revoked = client.lease_revoke(id).await.unwrap();
    assert_eq!(revoked.header().unwrap().revision(), before + 1);
    let events: Vec<_> = events_of(&mut stream, watch, 3)
        .await
        .iter()
        .map(summary)
        .collect();
    let expected: Vec<_> = ["l/a", "l/b", "l/c"]
        .iter()
        .map(|k| (EventType::Delete, k.to_string(), String::new(), before + 1))
        .collect();
    let mut sorted = events.clone();
    sorted.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(sorted, expected);
    assert_eq!(
        keys(&mut client, "l/", GetOptions::new().with_prefix()).await,
        ["l/plain"]
    );
    assert!(client.leases().await.unwrap().leases().is_empty());
}

#[tokio::test]
async fn maintenance_status_and_hash_kv_survive_a_restart() {
    let (mut store, mut client) = start().await;
    fill_range_fixture(&mut client).await;
    client.delete("r/b", None).await.unwrap(); // 8
    client.compact(5, None).await.unwrap();
    let status = client.status().await.unwrap();
    let member = status.header().unwrap().member_id();
    assert_eq!(status.leader(), member, "a single member leads itself");
    assert_eq!(status.header().unwrap().revision(), 8);
    assert!(
        status.raft_index() >= 8 && status.raft_term() >= 1,
        "{status:?}"
    );
    assert!(
        status.db_size() > 0 && !status.version().is_empty(),
        "{status:?}"
    );
    let hash = client.hash_kv(0).await.unwrap();
    assert_eq!(hash.header().unwrap().revision(), 8);
    assert_eq!(hash.compact_version(), 5);
    let at_seven = client.hash_kv(7).await.unwrap();
    assert_ne!(
        at_seven.hash(),
        hash.hash(),
        "the hash covers the delete at revision 8"
    );
    let keyspace = read_keyspace(&mut client).await;
    store.restart();
    let mut client = connect(&store).await;
    let after = client.hash_kv(0).await.unwrap();
    assert_eq!((after.hash(), after.compact_version()), (hash.hash(), 5));
    assert_eq!(after.header().unwrap().revision(), 8);
    assert_eq!(client.hash_kv(7).await.unwrap().hash(), at_seven.hash());
    assert_eq!(read_keyspace(&mut client).await, keyspace);
    let status = client.status().await.unwrap();
    assert_eq!(status.leader(), status.header().unwrap().member_id());
    assert_eq!(
        client.member_list().await.unwrap().members()[0].id(),
        member,
        "same member id after restart"
    );
}
