//! How a watch that starts in the past receives history: etcd 3.4 sends
//! the catch-up events many per WatchResponse (at most 1,000 of the
//! watcher's revisions each, the header at the present revision), never
//! splits one revision's events, and sends a txn's events together. Runs
//! on capstan-store and, with `CAPSTAN_TEST_SERVER=etcd`, on etcd 3.4.

use capstan_tests::client::connect;
use capstan_tests::store::TempStore;
use capstan_tests::watch::{next_response, open_watch};
use etcd_client::{Client, Txn, TxnOp, WatchOptions, WatchResponse, WatchStream};

/// Puts written before the watches start, one revision each (2..=1501).
const PUTS: usize = 1500;
const WRITERS: usize = 6;

/// Writes `b/even/<i>` or `b/odd/<i>` for each i in 0..PUTS, from
/// several clients at once (the order of revisions does not matter here).
async fn fill(client: &Client) {
    let tasks: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let mut client = client.clone();
            tokio::spawn(async move {
                for i in (writer..PUTS).step_by(WRITERS) {
                    let parity = if i % 2 == 0 { "even" } else { "odd" };
                    client
                        .put(format!("b/{parity}/{i}"), "v", None)
                        .await
                        .expect("put");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("writer");
    }
}

/// One txn that puts three keys: one revision, three events.
async fn txn_of_three(client: &mut Client, tag: &str) -> i64 {
    let puts = ["x", "y", "z"].map(|k| TxnOp::put(format!("b/txn/{tag}/{k}"), "v", None));
    let response = client.txn(Txn::new().and_then(puts)).await.expect("txn");
    response.header().expect("header").revision()
}

/// Each event's mod revision in one response.
fn revisions(response: &WatchResponse) -> Vec<i64> {
    response
        .events()
        .iter()
        .map(|event| event.kv().expect("kv").mod_revision())
        .collect()
}

async fn watch_from(client: &mut Client, prefix: &str, start: i64) -> (WatchStream, i64) {
    let options = WatchOptions::new().with_prefix().with_start_revision(start);
    open_watch(client, prefix, options).await
}

/// The next response, which must carry events of watch `id`.
async fn next_events(stream: &mut WatchStream, id: i64) -> WatchResponse {
    let response = next_response(stream).await;
    assert_eq!(response.watch_id(), id, "{response:?}");
    assert!(!response.canceled(), "{response:?}");
    assert!(!response.events().is_empty(), "{response:?}");
    response
}

fn header_revision(response: &WatchResponse) -> i64 {
    response.header().expect("header").revision()
}

/// Revisions `from..to`, then each txn revision three times.
fn expected(from: i64, to: i64, txns: &[i64]) -> Vec<i64> {
    let mut revisions: Vec<i64> = (from..to).collect();
    for &txn in txns {
        revisions.extend([txn; 3]);
    }
    revisions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catch_up_sends_a_thousand_revisions_per_response_and_keeps_a_txn_together() {
    // One test, one fill: writing 1,500 revisions is the slow part.
    let store = TempStore::start(&[]);
    let mut client = connect(&store).await;
    fill(&client).await;
    let old_txn = txn_of_three(&mut client, "old").await;
    assert_eq!(old_txn, PUTS as i64 + 2);
    let mut stream = from_the_start(&mut client, old_txn).await;
    // Live now: the next txn comes as one response of its three events.
    let new_txn = txn_of_three(&mut client, "new").await;
    let live = next_events(&mut stream.0, stream.1).await;
    assert_eq!(revisions(&live), [new_txn; 3]);
    assert_eq!(header_revision(&live), new_txn);
    only_the_watchers_revisions_count(&mut client, new_txn).await;
    // From the middle of history the batch starts there; both txns whole.
    let (mut stream, id) = watch_from(&mut client, "b/", 1400).await;
    let tail = next_events(&mut stream, id).await;
    assert_eq!(
        revisions(&tail),
        expected(1400, old_txn, &[old_txn, new_txn])
    );
}

/// From revision 1: revisions 2..=1001 in one response, the rest with the
/// txn in a second, each header at the present revision.
async fn from_the_start(client: &mut Client, txn_rev: i64) -> (WatchStream, i64) {
    let (mut stream, id) = watch_from(client, "b/", 1).await;
    let first = next_events(&mut stream, id).await;
    assert_eq!(revisions(&first), expected(2, 1002, &[]));
    assert_eq!(
        header_revision(&first),
        txn_rev,
        "catch-up headers say the present"
    );
    let second = next_events(&mut stream, id).await;
    let rest = expected(1002, txn_rev, &[txn_rev]);
    assert_eq!(revisions(&second), rest, "the txn's events in one response");
    assert_eq!(header_revision(&second), txn_rev);
    (stream, id)
}

/// The thousand counts the watcher's own revisions: 750 of the 1,502 are
/// `b/even/`'s, so they come in one response.
async fn only_the_watchers_revisions_count(client: &mut Client, present: i64) {
    let (mut stream, id) = watch_from(client, "b/even/", 1).await;
    let only = next_events(&mut stream, id).await;
    let got = revisions(&only);
    assert_eq!(got.len(), PUTS / 2, "{got:?}");
    assert!(got.windows(2).all(|w| w[0] < w[1]), "in revision order");
    assert_eq!(header_revision(&only), present);
}
