//! The store's slow-disk failpoint (`--experimental-enable-failpoints`,
//! `PUT /debug/failpoints/raft-log-sync-delay`): while raft log syncs are
//! held, no write is acknowledged; once the delay is removed the writes
//! finish, and all of them survive kill -9. capstan-store only: etcd has
//! its failpoints only in special builds.

use capstan_tests::client::{connect, grpc_status};
use capstan_tests::http::{Connection, Response};
use capstan_tests::poll::wait_for;
use capstan_tests::store::{on_reference_etcd, TempStore};
use tonic::Code;

const SYNC_DELAY: &str = "/debug/failpoints/raft-log-sync-delay";
/// An hour: no write could be acknowledged while it holds, if it works.
const HUGE_DELAY_MS: &str = "3600000";
const HELD_WRITES: usize = 4;

fn send(port: u16, method: &str, body: &str) -> Response {
    Connection::connect(port)
        .and_then(|mut conn| conn.send(method, SYNC_DELAY, &[], body.as_bytes()))
        .unwrap_or_else(|err| panic!("{method} {SYNC_DELAY}: {err}"))
}

fn delay_state(port: u16) -> (u64, u64) {
    let response = send(port, "GET", "");
    assert_eq!(response.status, 200, "{}", response.text());
    let json = response.json().expect("failpoint state is JSON");
    (
        json["delayMs"].as_u64().expect("delayMs"),
        json["syncsWaiting"].as_u64().expect("syncsWaiting"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_held_by_a_slow_log_sync_are_acknowledged_after_it_and_survive_kill9() {
    if on_reference_etcd() {
        return;
    }
    let mut store = TempStore::start(&["--experimental-enable-failpoints"]);
    let port = store.client_port;
    let mut client = connect(&store).await;
    client.put("before", "0", None).await.unwrap();

    let set = send(port, "PUT", HUGE_DELAY_MS);
    assert_eq!(set.status, 200, "{}", set.text());
    let writes: Vec<_> = (0..HELD_WRITES)
        .map(|i| {
            let mut client = client.clone();
            tokio::spawn(
                async move { client.put(format!("held/{i}"), format!("v{i}"), None).await },
            )
        })
        .collect();
    wait_for(
        std::time::Duration::from_secs(30),
        "a raft log sync held by the failpoint",
        || (delay_state(port).1 > 0).then_some(()),
    );
    // Every held write's entry is behind the held sync (or not yet
    // appended): none can have been acknowledged.
    let finished = writes.iter().filter(|w| w.is_finished()).count();
    assert_eq!(
        finished, 0,
        "a write was acknowledged while its log sync was held"
    );

    let cleared = send(port, "PUT", "0");
    assert_eq!(cleared.status, 200, "{}", cleared.text());
    let mut acked = Vec::new();
    for (i, write) in writes.into_iter().enumerate() {
        match write.await.expect("the write task") {
            Ok(response) => acked.push((i, response.header().unwrap().revision())),
            // The store gave up waiting (a very slow machine): the outcome
            // is unknown to the client, but the entry is in the log.
            Err(err) => assert_eq!(
                grpc_status(&err).map(|(code, _)| code),
                Some(Code::Unavailable),
                "held write {i}: {err}"
            ),
        }
    }
    assert_eq!(delay_state(port), (0, 0));

    store.kill9();
    store.restart();
    let mut client = connect(&store).await;
    for i in 0..HELD_WRITES {
        let got = client.get(format!("held/{i}"), None).await.unwrap();
        let kv = got.kvs().first().unwrap_or_else(|| panic!("held/{i} lost"));
        assert_eq!(kv.value(), format!("v{i}").as_bytes());
        if let Some((_, revision)) = acked.iter().find(|(j, _)| *j == i) {
            assert_eq!(
                kv.mod_revision(),
                *revision,
                "held/{i}'s acknowledged revision"
            );
        }
    }
    // The delay lives in memory only: a restarted member syncs normally.
    assert_eq!(delay_state(store.client_port), (0, 0));
}

#[tokio::test]
async fn failpoints_are_off_without_the_flag_and_bad_delays_are_refused() {
    if on_reference_etcd() {
        return;
    }
    let plain = TempStore::start(&[]);
    for method in ["PUT", "GET"] {
        let response = send(plain.client_port, method, "100");
        assert_eq!(response.status, 404, "{method}: {}", response.text());
        assert!(
            response.text().contains("--experimental-enable-failpoints"),
            "{method}: {}",
            response.text()
        );
    }

    let store = TempStore::start(&["--experimental-enable-failpoints"]);
    let port = store.client_port;
    for bad in ["soon", "-5", "1.5", ""] {
        let response = send(port, "PUT", bad);
        assert_eq!(response.status, 400, "{bad:?}: {}", response.text());
        assert!(
            response.text().contains("whole number of milliseconds"),
            "{bad:?}: {}",
            response.text()
        );
        assert_eq!(delay_state(port), (0, 0), "{bad:?} changed nothing");
    }
    let set = send(port, "PUT", "25\n");
    assert_eq!(set.status, 200);
    assert_eq!(set.json().unwrap()["delayMs"], 25);
    let mut client = connect(&store).await;
    client.put("k", "slow but there", None).await.unwrap();
    let got = client.get("k", None).await.unwrap();
    assert_eq!(got.kvs()[0].value(), b"slow but there");
}

/// The deliberately broken server the fault suites are shown to catch:
/// with `put-error-every` set to N, every Nth put is applied and then
/// answered with `Internal`.
#[tokio::test]
async fn put_error_every_applies_every_nth_put_and_answers_it_internal() {
    if on_reference_etcd() {
        return;
    }
    const PATH: &str = "/debug/failpoints/put-error-every";
    let put_every = |port: u16, body: &str| {
        Connection::connect(port)
            .and_then(|mut conn| conn.send("PUT", PATH, &[], body.as_bytes()))
            .unwrap_or_else(|err| panic!("PUT {PATH}: {err}"))
    };
    let plain = TempStore::start(&[]);
    assert_eq!(put_every(plain.client_port, "10").status, 404);

    let store = TempStore::start(&["--experimental-enable-failpoints"]);
    let refused = put_every(store.client_port, "often");
    assert_eq!(refused.status, 400, "{}", refused.text());
    let set = put_every(store.client_port, "3");
    assert_eq!(set.status, 200, "{}", set.text());
    assert_eq!(set.json().unwrap()["every"], 3);
    let mut client = connect(&store).await;
    let mut failed = Vec::new();
    for i in 1..=9 {
        if let Err(err) = client.put(format!("k{i}"), "v", None).await {
            let (code, message) = grpc_status(&err).expect("a gRPC status");
            assert_eq!(code, Code::Internal, "put {i}: {message}");
            failed.push(i);
        }
    }
    assert_eq!(failed, vec![3, 6, 9]);
    for i in 1..=9 {
        let got = client.get(format!("k{i}"), None).await.unwrap();
        assert_eq!(got.kvs().len(), 1, "k{i} was applied, failed or not");
    }
}
