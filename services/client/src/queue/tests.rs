use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::*;

#[tokio::test(start_paused = true)]
async fn adds_are_deduplicated_until_taken() {
    let queue = WorkQueue::<String>::new("test-dedup");
    queue.add("a".into());
    queue.add("a".into());
    queue.add("b".into());
    assert_eq!(queue.len(), 2);
    assert_eq!(queue.get().await.as_deref(), Some("a"));
    assert_eq!(queue.get().await.as_deref(), Some("b"));
    assert!(queue.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_key_added_while_processing_comes_back_after_done() {
    let queue = WorkQueue::<&str>::new("test-processing");
    queue.add("a");
    let a = queue.get().await.unwrap();
    queue.add("a");
    // Not handed out while the first worker holds it.
    let second = tokio::time::timeout(Duration::from_secs(1), queue.get()).await;
    assert!(second.is_err(), "handed out twice: {second:?}");
    queue.done(&a);
    assert_eq!(queue.get().await, Some("a"));
}

#[tokio::test(start_paused = true)]
async fn add_after_waits_and_forget_resets_retries() {
    let queue = WorkQueue::<&str>::new("test-delay");
    let start = Instant::now();
    queue.add_after("later", Duration::from_secs(3));
    assert!(queue.is_empty());
    assert_eq!(queue.get().await, Some("later"));
    assert_eq!(start.elapsed(), Duration::from_secs(3));

    queue.done(&"later");
    for _ in 0..3 {
        queue.add_rate_limited("flaky");
        let key = queue.get().await.unwrap();
        queue.done(&key);
    }
    assert_eq!(queue.num_requeues(&"flaky"), 3);
    queue.forget(&"flaky");
    assert_eq!(queue.num_requeues(&"flaky"), 0);
}

#[tokio::test(start_paused = true)]
async fn rate_limited_delays_double() {
    let queue = WorkQueue::<&str>::new("test-backoff");
    let mut waits = Vec::new();
    for _ in 0..3 {
        let start = Instant::now();
        queue.add_rate_limited("k");
        let key = queue.get().await.unwrap();
        waits.push(start.elapsed());
        queue.done(&key);
    }
    assert_eq!(waits, [5, 10, 20].map(Duration::from_millis).to_vec());
}

#[tokio::test(start_paused = true)]
async fn shutdown_drains_then_ends_and_refuses_adds() {
    let queue = WorkQueue::<u32>::new("test-shutdown");
    queue.add(1);
    queue.add_after(2, Duration::from_secs(1));
    queue.shutdown();
    queue.add(3);
    assert_eq!(queue.get().await, Some(1));
    assert_eq!(queue.get().await, None);
}

#[tokio::test(start_paused = true)]
async fn shutdown_wakes_waiting_workers() {
    let queue = WorkQueue::<u32>::new("test-wake");
    let waiter = tokio::spawn({
        let queue = queue.clone();
        async move { queue.get().await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    queue.shutdown();
    assert_eq!(waiter.await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_retry_errors_survive_panics_and_never_share_a_key() {
    let queue = WorkQueue::<u32>::with_rate_limiter(
        "test-workers",
        ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_millis(10)),
    );
    let calls = Arc::new(parking_lot::Mutex::new(
        std::collections::HashMap::<u32, u32>::new(),
    ));
    let busy = Arc::new(parking_lot::Mutex::new(
        std::collections::HashSet::<u32>::new(),
    ));
    let overlaps = Arc::new(AtomicUsize::new(0));
    for key in 0..20 {
        queue.add(key);
    }
    let handler = {
        let (calls, busy, overlaps, queue) =
            (calls.clone(), busy.clone(), overlaps.clone(), queue.clone());
        move |key: u32| {
            let (calls, busy, overlaps, queue) =
                (calls.clone(), busy.clone(), overlaps.clone(), queue.clone());
            async move {
                if !busy.lock().insert(key) {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                // Re-adding while processing must not start a second worker on it.
                queue.add(key);
                tokio::time::sleep(Duration::from_millis(2)).await;
                let n = {
                    let mut calls = calls.lock();
                    let n = calls.entry(key).or_default();
                    *n += 1;
                    *n
                };
                busy.lock().remove(&key);
                match (key, n) {
                    (7, 1) => panic!("key 7 panics once"),
                    (3, 1 | 2) => Err("key 3 fails twice"),
                    _ => Ok(()),
                }
            }
        }
    };
    let run = tokio::spawn(run_workers(queue.clone(), 4, handler));
    // Each key runs at least twice (the re-add); 3 and 7 run more.
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let done = {
                let calls = calls.lock();
                (0..20).all(|k| calls.get(&k).copied().unwrap_or(0) >= 2)
                    && calls.get(&3).copied().unwrap_or(0) >= 3
            };
            if done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("every key processed, failures retried");
    queue.shutdown();
    tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "a key was processed by two workers at once"
    );
}
