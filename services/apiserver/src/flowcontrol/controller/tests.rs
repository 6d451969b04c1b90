use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;

use super::*;
use crate::flowcontrol::bootstrap::{mandatory_levels, suggested_levels, suggested_schemas};

/// A limited level that queues (queues, handSize, queueLengthLimit).
fn level(
    name: &str,
    shares: i32,
    lendable: i32,
    borrowing: Option<i32>,
    queuing: (i32, i32, i32),
) -> PriorityLevelConfiguration {
    serde_json::from_value(json!({
        "metadata": {"name": name, "uid": format!("uid-{name}")},
        "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": shares,
            "lendablePercent": lendable,
            "borrowingLimitPercent": borrowing,
            "limitResponse": {"type": "Queue", "queuing": {
                "queues": queuing.0, "handSize": queuing.1, "queueLengthLimit": queuing.2}}}}
    }))
    .unwrap()
}

/// A schema sending every request of `user` to `level`, by user.
fn schema(name: &str, level: &str, user: &str, precedence: i32) -> FlowSchema {
    serde_json::from_value(json!({
        "metadata": {"name": name, "uid": format!("uid-{name}")},
        "spec": {
            "priorityLevelConfiguration": {"name": level},
            "matchingPrecedence": precedence,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{
                "subjects": [{"kind": "User", "user": {"name": user}}],
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                   "namespaces": ["*"], "clusterScope": true}]}]}
    }))
    .unwrap()
}

fn pods(user: &str) -> RequestDigest {
    RequestDigest::resource(
        user,
        &["system:authenticated"],
        "list",
        "",
        "pods",
        "default",
    )
}

fn engine(
    server_limit: u32,
    levels: &[PriorityLevelConfiguration],
    schemas: &[FlowSchema],
) -> Arc<FlowControl> {
    let engine = FlowControl::new(server_limit, DEFAULT_WAIT_LIMIT, FlowControlMetrics::new());
    engine.configure(levels, schemas);
    Arc::new(engine)
}

/// kube's `TestPriorityLevelIsolation`: an elephant with 51 streams and
/// a mouse with 3, at separate levels of one seat each, for 10 s. The
/// mouse is never rejected and both get about the same service.
#[tokio::test(start_paused = true)]
async fn an_elephant_does_not_starve_a_mouse_at_another_level() {
    let levels = [
        level("elephant", 1, 0, Some(0), (64, 6, 100)),
        level("mouse", 1, 0, Some(0), (64, 6, 100)),
    ];
    let schemas = [
        schema("elephant", "elephant", "elephant", 100),
        schema("mouse", "mouse", "mouse", 100),
    ];
    // 7 seats over shares 1 + 1 + 5 (catch-all): one seat each.
    let engine = engine(7, &levels, &schemas);
    assert_eq!(engine.limits("elephant").unwrap().nominal, 1);
    assert_eq!(engine.limits("mouse").unwrap().upper, 1);
    let served = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let rejected = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let until = Instant::now() + Duration::from_secs(10);
    let mut streams = Vec::new();
    for (who, count) in [(0usize, 51), (1usize, 3)] {
        for _ in 0..count {
            let (engine, served, rejected) = (engine.clone(), served.clone(), rejected.clone());
            let user = ["elephant", "mouse"][who];
            streams.push(tokio::spawn(async move {
                while Instant::now() < until {
                    match engine.admit(&pods(user), &ListShape::default()).await {
                        Ok(admitted) => {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            drop(admitted);
                            served[who].fetch_add(1, Ordering::Relaxed);
                        }
                        Err(_) => {
                            rejected[who].fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    }
                }
            }));
        }
    }
    for stream in streams {
        stream.await.unwrap();
    }
    let (elephant, mouse) = (
        served[0].load(Ordering::Relaxed),
        served[1].load(Ordering::Relaxed),
    );
    assert_eq!(
        rejected[1].load(Ordering::Relaxed),
        0,
        "the mouse was rejected"
    );
    assert!(
        mouse > 500 && elephant > 500,
        "elephant {elephant}, mouse {mouse}"
    );
    assert!(
        elephant <= 2 * mouse && mouse <= 2 * elephant,
        "elephant {elephant}, mouse {mouse}"
    );
}

/// Within one level, a user with many streams and one with a few share
/// the seats by flow, not by stream.
#[tokio::test(start_paused = true)]
async fn flows_of_one_level_share_it_fairly() {
    let levels = [level("shared", 1, 0, Some(0), (64, 6, 100))];
    let schemas = [
        schema("noisy", "shared", "noisy", 100),
        schema("quiet", "shared", "quiet", 100),
    ];
    let engine = engine(6, &levels, &schemas);
    let served = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let until = Instant::now() + Duration::from_secs(5);
    let mut streams = Vec::new();
    for (who, count) in [(0usize, 40), (1usize, 2)] {
        for _ in 0..count {
            let (engine, served) = (engine.clone(), served.clone());
            let user = ["noisy", "quiet"][who];
            streams.push(tokio::spawn(async move {
                while Instant::now() < until {
                    if let Ok(admitted) = engine.admit(&pods(user), &ListShape::default()).await {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        drop(admitted);
                        served[who].fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
    }
    for stream in streams {
        stream.await.unwrap();
    }
    let (noisy, quiet) = (
        served[0].load(Ordering::Relaxed),
        served[1].load(Ordering::Relaxed),
    );
    // First come, first served would give the quiet user 2 turns in 42.
    // Its flow has queues of its own (the noisy one spreads over at most
    // its hand of 6), and the queues take turns: it gets at least a
    // sixth.
    assert!(quiet * 5 >= noisy, "noisy {noisy}, quiet {quiet}");
    assert!(noisy + quiet > 400, "noisy {noisy}, quiet {quiet}");
}

/// An idle level lends its lendable seats to a busy one at the next
/// adjustment, and takes them back as its own demand returns.
#[tokio::test(start_paused = true)]
async fn a_busy_level_borrows_what_an_idle_one_lends() {
    let levels = [
        level("busy", 50, 50, None, (64, 6, 100)),
        level("idle", 50, 50, None, (64, 6, 100)),
    ];
    let schemas = [
        schema("busy", "busy", "busy", 100),
        schema("idle", "idle", "idle", 100),
    ];
    // 20 seats over shares 50 + 50 + 5: 10, 10 and 1.
    let engine = engine(20, &levels, &schemas);
    assert_eq!(engine.limits("busy").unwrap().nominal, 10);
    assert_eq!(engine.limits("busy").unwrap().lower, 5);
    let running = Arc::new(AtomicU64::new(0));
    let (release, released) = tokio::sync::watch::channel(false);
    for _ in 0..30 {
        let (engine, running, mut released) = (engine.clone(), running.clone(), released.clone());
        tokio::spawn(async move {
            let admitted = engine.admit(&pods("busy"), &ListShape::default()).await;
            running.fetch_add(1, Ordering::Relaxed);
            let _ = released.wait_for(|r| *r).await;
            drop(admitted);
        });
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    let before = running.load(Ordering::Relaxed);
    assert_eq!(before as u32, engine.current_limit("busy").unwrap());
    assert!(before <= 10, "{before}");
    tokio::time::sleep(Duration::from_secs(10)).await;
    engine.adjust_limits();
    tokio::time::sleep(Duration::from_millis(10)).await;
    // Demand of 30 against 10 nominal: half the idle level's 10 seats
    // are lendable, and the busy level gets them.
    assert_eq!(engine.current_limit("busy"), Some(15));
    assert_eq!(engine.current_limit("idle"), Some(5));
    assert_eq!(running.load(Ordering::Relaxed), 15);
    release.send(true).unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(running.load(Ordering::Relaxed), 30);
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_is_rejected_with_what_a_429_needs() {
    let levels = [level("tiny", 1, 0, Some(0), (1, 1, 1))];
    let schemas = [schema("tiny", "tiny", "alice", 100)];
    // 6 seats over shares 1 + 5: one seat.
    let engine = engine(6, &levels, &schemas);
    let running = engine
        .admit(&pods("alice"), &ListShape::default())
        .await
        .unwrap();
    assert_eq!(running.flow_schema.uid.as_deref(), Some("uid-tiny"));
    assert_eq!(running.priority_level.name, "tiny");
    let queued = {
        let engine = engine.clone();
        tokio::spawn(async move {
            engine
                .admit(&pods("alice"), &ListShape::default())
                .await
                .map(|_| ())
        })
    };
    tokio::time::sleep(Duration::from_millis(1)).await;
    let rejected = engine
        .admit(&pods("alice"), &ListShape::default())
        .await
        .unwrap_err();
    assert_eq!(rejected.reason, RejectReason::QueueFull);
    assert_eq!(rejected.retry_after, 1);
    assert_eq!(rejected.priority_level.uid.as_deref(), Some("uid-tiny"));
    // The queued one waits out its 15 s and is turned away too.
    let timed_out = queued.await.unwrap().unwrap_err();
    assert_eq!(timed_out.reason, RejectReason::TimeOut);
    let labels = RejectLabels {
        priority_level: "tiny".into(),
        flow_schema: "tiny".into(),
        reason: "time-out",
    };
    assert_eq!(engine.metrics().rejected.get_or_create(&labels).get(), 1);
    drop(running);
    assert!(engine
        .admit(&pods("alice"), &ListShape::default())
        .await
        .is_ok());
}

#[tokio::test(start_paused = true)]
async fn the_catch_all_rejects_at_once_and_the_exempt_level_never_does() {
    // Nobody but catch-all and exempt: 5 shares of 5 seats.
    let engine = engine(5, &[], &[]);
    assert_eq!(engine.current_limit(CATCH_ALL), Some(5));
    let (bob, shape) = (pods("bob"), ListShape::default());
    let held: Vec<_> = futures::future::join_all((0..5).map(|_| engine.admit(&bob, &shape))).await;
    assert!(held.iter().all(Result::is_ok));
    let rejected = engine
        .admit(&pods("bob"), &ListShape::default())
        .await
        .unwrap_err();
    assert_eq!(rejected.reason, RejectReason::ConcurrencyLimit);
    assert_eq!(rejected.flow_schema.name, CATCH_ALL);
    assert_eq!(
        rejected.flow_schema.uid, None,
        "supplied, not read from the API"
    );
    let admin = RequestDigest::resource("admin", &["system:masters"], "list", "", "pods", "");
    for _ in 0..50 {
        let admitted = engine.admit(&admin, &ListShape::default()).await.unwrap();
        assert_eq!(admitted.priority_level.name, "exempt");
        std::mem::forget(admitted);
    }
}

#[tokio::test(start_paused = true)]
async fn a_started_watch_gives_its_seat_back() {
    let engine = engine(5, &[], &[]);
    let watches: Vec<_> = futures::future::join_all((0..20).map(|_| {
        let watch =
            RequestDigest::resource("bob", &["system:authenticated"], "watch", "", "pods", "a");
        let engine = engine.clone();
        async move {
            engine
                .admit(&watch, &ListShape::default())
                .await
                .unwrap()
                .release()
        }
    }))
    .await;
    assert_eq!(watches.len(), 20);
    assert!(engine
        .admit(&pods("bob"), &ListShape::default())
        .await
        .is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_client_that_goes_away_gives_up_its_place() {
    let levels = [level("tiny", 1, 0, Some(0), (1, 1, 1))];
    let engine = engine(6, &levels, &[schema("tiny", "tiny", "alice", 100)]);
    let running = engine
        .admit(&pods("alice"), &ListShape::default())
        .await
        .unwrap();
    let gone = tokio::time::timeout(
        Duration::from_secs(1),
        engine.admit(&pods("alice"), &ListShape::default()),
    )
    .await;
    assert!(gone.is_err(), "still queued after a second");
    let labels = RejectLabels {
        priority_level: "tiny".into(),
        flow_schema: "tiny".into(),
        reason: "cancelled",
    };
    assert_eq!(engine.metrics().rejected.get_or_create(&labels).get(), 1);
    // Its place is free again: the queue of one takes another.
    let next = {
        let engine = engine.clone();
        tokio::spawn(async move {
            engine
                .admit(&pods("alice"), &ListShape::default())
                .await
                .is_ok()
        })
    };
    tokio::time::sleep(Duration::from_millis(1)).await;
    drop(running);
    assert!(next.await.unwrap());
}

#[tokio::test(start_paused = true)]
async fn reconfiguring_keeps_the_seats_of_running_requests() {
    let levels = [level("tiny", 1, 0, Some(0), (8, 2, 10))];
    let engine = engine(7, &levels, &[schema("tiny", "tiny", "alice", 100)]);
    let running = engine
        .admit(&pods("alice"), &ListShape::default())
        .await
        .unwrap();
    // The level goes away while its request runs: new requests fall to
    // the catch-all, and the old one still finishes where it ran.
    engine.configure(&[], &[]);
    let elsewhere = engine
        .admit(&pods("alice"), &ListShape::default())
        .await
        .unwrap();
    assert_eq!(elsewhere.priority_level.name, CATCH_ALL);
    assert!(engine.current_limit("tiny").is_some(), "draining");
    drop(running);
    engine.adjust_limits();
    assert_eq!(engine.current_limit("tiny"), None, "drained");
}

#[tokio::test(start_paused = true)]
async fn kube_defaults_serve_six_hundred_seats() {
    let levels: Vec<_> = suggested_levels()
        .into_iter()
        .chain(mandatory_levels())
        .collect();
    let engine = engine(600, &levels, &suggested_schemas());
    let nominal: Vec<u32> = [
        "system",
        "node-high",
        "leader-election",
        "workload-high",
        "workload-low",
        "global-default",
        CATCH_ALL,
    ]
    .iter()
    .map(|name| engine.limits(name).unwrap().nominal)
    .collect();
    assert_eq!(nominal, [74, 98, 25, 98, 245, 49, 13]);
    // A list of 30,000 pods costs the most a request may.
    let shape = ListShape {
        object_count: Some(30_000),
        ..ListShape::default()
    };
    let admitted = engine.admit(&pods("alice"), &shape).await.unwrap();
    assert_eq!(
        (admitted.priority_level.name.as_str(), admitted.seats),
        ("global-default", 8)
    );
}
