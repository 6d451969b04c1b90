//! The whole control plane under fire: three `capstan-store` members and
//! two `capstan-apiserver`s, writers creating ConfigMaps through both,
//! and the store's leader killed with SIGKILL (then restarted) while they
//! write. Nothing a client was told was created (201) may be lost, and a
//! watch opened before the first kill sees every one of them once, in
//! order. Rounds: `CAPSTAN_CHAOS_ROUNDS` (`make chaos`), else 1.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use capstan_tests::apiserver::{ApiServer, Http, WatchEvents};
use capstan_tests::cluster::Cluster;
use capstan_tests::http::HttpError;
use capstan_tests::poll::wait_for;
use serde_json::{json, Value};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const WRITERS: usize = 4;

fn rounds() -> usize {
    std::env::var("CAPSTAN_CHAOS_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1)
}

/// What the writers saw: acknowledged creates with their revisions and
/// the time of each, and how many requests failed.
#[derive(Default)]
struct Ledger {
    acked: Vec<(String, i64, Instant)>,
    /// Failures whose outcome is unknown, by class: the store electing
    /// (503, 504) or a response that did not come in time.
    ambiguous: BTreeMap<String, usize>,
    /// Failures that are bugs here: the API servers stay up, names are
    /// new, so a refused connection, a 409 or a 500 should never happen.
    unexpected: Vec<String>,
}

impl Ledger {
    fn record(&mut self, name: String, answer: Result<(u16, Value), HttpError>) {
        match answer {
            Ok((201, object)) => {
                let rv = object["metadata"]["resourceVersion"]
                    .as_str()
                    .and_then(|rv| rv.parse().ok())
                    .unwrap_or_else(|| panic!("a created object has a resourceVersion: {object}"));
                self.acked.push((name, rv, Instant::now()));
            }
            Ok((code @ (503 | 504), _)) => {
                *self.ambiguous.entry(code.to_string()).or_default() += 1
            }
            Err(HttpError::Timeout(_)) => *self.ambiguous.entry("timeout".into()).or_default() += 1,
            Ok((code, status)) => self.unexpected.push(format!("{name}: {code} {status}")),
            Err(err) => self.unexpected.push(format!("{name}: {err}")),
        }
    }
}

fn writer(id: usize, ports: [u16; 2], stop: Arc<AtomicBool>, ledger: Arc<Mutex<Ledger>>) {
    let mut clients = ports.map(Http::connect);
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        let name = format!("w{id}-{i}");
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                          "data": {"writer": id.to_string()}});
        let answer = clients[i % 2].try_request("POST", CMS, Some(&body));
        if answer.is_err() {
            // The connection is in an unknown state after a failure.
            clients[i % 2] = Http::connect(ports[i % 2]);
        }
        // An ambiguous outcome leaves the name neither required nor
        // forbidden later.
        ledger.lock().unwrap().record(name, answer);
        i += 1;
    }
}

/// The longest time without an acknowledged write from `since` to now
/// (reported, not asserted: it depends on the machine's load).
fn longest_pause(ledger: &Ledger, since: Instant) -> Duration {
    let mut times: Vec<Instant> = ledger
        .acked
        .iter()
        .map(|a| a.2)
        .filter(|t| *t > since)
        .collect();
    times.sort();
    let mut previous = since;
    let mut longest = Duration::ZERO;
    for t in times.iter().chain(std::iter::once(&Instant::now())) {
        longest = longest.max(*t - previous);
        previous = *t;
    }
    longest
}

#[test]
fn nothing_acknowledged_is_lost_when_the_store_leader_dies() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(dir.path(), 3, &[]);
    let urls = cluster.urls();
    let first = ApiServer::start_with(&urls, dir.path(), "api-a", &[]);
    let reversed: Vec<String> = urls.iter().rev().cloned().collect();
    let second = ApiServer::start_with(&reversed, dir.path(), "api-b", &[]);
    let (_, list) = Http::connect(first.port).get(CMS);
    let start = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut watch = WatchEvents::open(
        second.port,
        &format!("{CMS}?watch=1&resourceVersion={start}"),
    );

    let stop = Arc::new(AtomicBool::new(false));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let writers: Vec<_> = (0..WRITERS)
        .map(|id| {
            let (stop, ledger) = (stop.clone(), ledger.clone());
            let ports = [first.port, second.port];
            thread::spawn(move || writer(id, ports, stop, ledger))
        })
        .collect();

    for round in 0..rounds() {
        thread::sleep(Duration::from_millis(1500));
        let leader = cluster.wait_for_leader(Duration::from_secs(20));
        let killed_at = Instant::now();
        cluster.members[leader].kill9();
        // More acknowledgements than writers could have had in flight at
        // the kill: writes go through the new leader.
        wait_for(
            Duration::from_secs(30),
            "writes to resume after the kill",
            || {
                let ledger = ledger.lock().unwrap();
                let after = ledger.acked.iter().filter(|a| a.2 > killed_at).count();
                (after > 5 * WRITERS).then_some(())
            },
        );
        let outage = longest_pause(&ledger.lock().unwrap(), killed_at);
        cluster.members[leader].start();
        eprintln!("round {round}: killed member {leader}; writes paused for {outage:?} at most");
    }
    thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().expect("a writer panicked");
    }
    let ledger = ledger.lock().unwrap();
    assert!(
        ledger.acked.len() > 20,
        "too few writes to mean anything: {}",
        ledger.acked.len()
    );
    eprintln!(
        "{} creates acknowledged, ambiguous failures {:?}, unexpected {}",
        ledger.acked.len(),
        ledger.ambiguous,
        ledger.unexpected.len()
    );
    assert!(
        ledger.unexpected.is_empty(),
        "{} unexpected failures (acknowledged {}, ambiguous {:?}): {:#?}",
        ledger.unexpected.len(),
        ledger.acked.len(),
        ledger.ambiguous,
        ledger.unexpected
    );

    // Every acknowledged create is there, read through either API server.
    for port in [first.port, second.port] {
        let (code, list) = Http::connect(port).get(CMS);
        assert_eq!(code, 200, "{list}");
        let present: HashMap<&str, &Value> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| (o["metadata"]["name"].as_str().unwrap(), o))
            .collect();
        for (name, rv, _) in &ledger.acked {
            let object = present.get(name.as_str()).unwrap_or_else(|| {
                panic!("acknowledged {name} (rv {rv}) is missing via port {port}")
            });
            // Unchanged since its create: the same version and data.
            assert_eq!(
                object["metadata"]["resourceVersion"],
                rv.to_string(),
                "{name} via port {port}: {object}"
            );
            let writer = name[1..].split('-').next().unwrap();
            assert_eq!(object["data"]["writer"], writer, "{name} via port {port}");
        }
    }

    // The watch saw each of them once, in revision order.
    let wanted: HashMap<&str, i64> = ledger
        .acked
        .iter()
        .map(|(n, rv, _)| (n.as_str(), *rv))
        .collect();
    let mut seen: HashMap<String, i64> = HashMap::new();
    let mut last = 0;
    while wanted.keys().any(|n| !seen.contains_key(*n)) {
        let event = watch.next(Duration::from_secs(20)).unwrap_or_else(|| {
            panic!(
                "the watch ended with {} of {} seen",
                seen.len(),
                wanted.len()
            )
        });
        assert_eq!(event["type"], "ADDED", "{event}");
        let object = &event["object"];
        let name = object["metadata"]["name"].as_str().unwrap().to_string();
        let rv: i64 = object["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(rv > last, "events in revision order: {rv} after {last}");
        last = rv;
        assert!(
            seen.insert(name.clone(), rv).is_none(),
            "{name} delivered twice"
        );
        if let Some(acked) = wanted.get(name.as_str()) {
            assert_eq!(
                *acked, rv,
                "{name}: the watch and the create agree on its revision"
            );
        }
    }
}
