//! An etcd-API traffic profile recorded as a history: clients doing put,
//! linearizable get, compare-and-swap, delete, a two-key transaction and
//! lease grant / keepalive / revoke on a few keys under one prefix, and
//! watchers collecting every event under that prefix across reconnects.
//! An error is read as `answers` says: only a timeout, a dropped
//! connection or `Unavailable` leave the outcome unknown; a lawful
//! refusal did not happen; anything else is a failure of the run.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, PutOptions, Txn, TxnOp, WatchOptions,
};

use crate::answers;
use crate::checker::watch::{Event, Kind, Write};
use crate::history::{Input, Output, Recorder};

/// Everything lives under this prefix, so a watch on it sees every
/// revision the traffic makes.
pub const PREFIX: &str = "fault/";
const KEYS: usize = 6;
const ATOMIC: [&str; 2] = ["fault/atomic/a", "fault/atomic/b"];
const LEASE_TTL: i64 = 30;
/// The pause after a failed request before trying the next member.
const BACKOFF: Duration = Duration::from_millis(100);

/// What the clients share: the history, the writes they were told
/// succeeded (with revisions, for the watch checks) and every value sent.
#[derive(Default)]
pub struct Traffic {
    pub recorder: Recorder,
    pub acked: Mutex<Vec<Write>>,
    pub issued: Mutex<HashSet<String>>,
    pub leases: Mutex<LeaseCounts>,
    /// Answers that were failures of the server (see `answers`).
    pub errors: Mutex<Vec<String>>,
    pub stop: AtomicBool,
    /// The members' client URLs, rewritten when a member is replaced.
    pub urls: Mutex<Vec<String>>,
}

impl Traffic {
    pub fn new(urls: Vec<String>) -> Arc<Traffic> {
        Arc::new(Traffic {
            urls: Mutex::new(urls),
            ..Traffic::default()
        })
    }

    /// A client of the member in slot `slot` (modulo their number).
    async fn connect_to(&self, slot: usize) -> Option<Client> {
        let url = {
            let urls = self.urls.lock().unwrap();
            urls[slot % urls.len()].clone()
        };
        connect(&[url]).await
    }

    /// What client `id` was told by an error to `what`: unknown, or (a
    /// refusal, or a failure, which is noted) that it did not happen.
    fn judge(&self, id: usize, what: &str, err: &etcd_client::Error) -> Output {
        let note = || format!("client {id}: {what}: {err}");
        answers::outcome(answers::etcd(err), &self.errors, note)
    }
}

#[derive(Debug, Default, Clone)]
pub struct LeaseCounts {
    pub granted: usize,
    pub kept_alive: usize,
    pub revoked: usize,
    pub failed: usize,
    /// The run-long lease went unrenewed for a TTL, so its expiry is lawful.
    pub held_may_expire: bool,
}

/// A client with short timeouts: a request to a dead or paused member
/// ends as an ambiguous outcome instead of stalling the client.
pub async fn connect(urls: &[String]) -> Option<Client> {
    let options = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_timeout(Duration::from_secs(3));
    Client::connect(urls, Some(options)).await.ok()
}

/// A small deterministic generator (xorshift), seeded per client.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// One client's loop until `traffic.stop`. It talks to one member at a
/// time and moves to the next after a failure, after a pause, so a dead
/// member costs a few ambiguous operations rather than a spin of them.
pub async fn client(id: usize, traffic: Arc<Traffic>) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((id as u64 + 1) * 0x1000_0001));
    let mut seq = 0usize;
    let mut last_seen: Vec<Option<String>> = vec![None; KEYS];
    let mut member = id;
    while !traffic.stop.load(Ordering::Relaxed) {
        member += 1;
        let Some(mut etcd) = traffic.connect_to(member).await else {
            tokio::time::sleep(BACKOFF).await;
            continue;
        };
        loop {
            if traffic.stop.load(Ordering::Relaxed) {
                return;
            }
            seq += 1;
            let value = format!("c{id}-{seq}");
            let k = rng.below(KEYS as u64) as usize;
            let key = format!("{PREFIX}k{k}");
            let op = Op {
                id,
                key: &key,
                value: &value,
                traffic: &traffic,
            };
            let answered = match rng.below(100) {
                0..=24 => op.put(&mut etcd).await,
                25..=54 => match op.get(&mut etcd).await {
                    Some(seen) => {
                        last_seen[k] = seen;
                        true
                    }
                    None => false,
                },
                55..=74 => op.cas(&mut etcd, last_seen[k].clone()).await,
                75..=81 => op.delete(&mut etcd).await,
                82..=89 => op.atomic_pair(&mut etcd).await,
                _ => op.lease_cycle(&mut etcd, seq).await,
            };
            if !answered {
                tokio::time::sleep(BACKOFF).await;
                break;
            }
        }
    }
}

struct Op<'a> {
    id: usize,
    key: &'a str,
    value: &'a str,
    traffic: &'a Traffic,
}

fn revision_of(header: Option<&etcd_client::ResponseHeader>) -> Option<i64> {
    header.map(|h| h.revision())
}

impl Op<'_> {
    fn issue(&self) {
        self.traffic
            .issued
            .lock()
            .unwrap()
            .insert(self.value.to_string());
    }

    fn ack(&self, key: &str, revision: i64, kind: Kind) {
        let value = (kind == Kind::Put).then(|| self.value.to_string());
        let write = Write {
            revision,
            key: key.to_string(),
            kind,
            value,
        };
        self.traffic.acked.lock().unwrap().push(write);
    }

    /// The outcome of an answer to `what`: `ok`'s for a response.
    fn outcome<T>(
        &self,
        what: &str,
        answer: Result<T, etcd_client::Error>,
        ok: impl FnOnce(T) -> Output,
        header: impl Fn(&T) -> Option<i64>,
    ) -> (Output, Option<i64>) {
        match answer {
            Ok(response) => {
                let revision = header(&response);
                (ok(response), revision)
            }
            Err(err) => (self.traffic.judge(self.id, what, &err), None),
        }
    }

    /// Records an operation; whether it was answered.
    fn record(&self, key: &str, input: Input, call: u64, outcome: (Output, Option<i64>)) -> bool {
        let answered = outcome.0 != Output::Unknown;
        self.traffic
            .recorder
            .record(self.id, key, input, call, outcome);
        answered
    }

    async fn put(&self, etcd: &mut Client) -> bool {
        self.issue();
        let call = self.traffic.recorder.now();
        let answer = etcd.put(self.key, self.value, None).await;
        let what = format!("put {}", self.key);
        let outcome = self.outcome(&what, answer, |_| Output::Put, |r| revision_of(r.header()));
        if let (Output::Put, Some(revision)) = outcome {
            self.ack(self.key, revision, Kind::Put);
        }
        self.record(
            self.key,
            Input::Put {
                value: self.value.into(),
            },
            call,
            outcome,
        )
    }

    /// A linearizable read; the value seen (for a later CAS), or None if
    /// it failed. A failed read tells nothing and is not recorded.
    async fn get(&self, etcd: &mut Client) -> Option<Option<String>> {
        let call = self.traffic.recorder.now();
        let response = match etcd.get(self.key, None).await {
            Ok(response) => response,
            Err(err) => {
                self.traffic
                    .judge(self.id, &format!("get {}", self.key), &err);
                return None;
            }
        };
        let value = response
            .kvs()
            .first()
            .map(|kv| kv.value_str().unwrap_or("").to_string());
        let outcome = (Output::Get(value.clone()), revision_of(response.header()));
        self.record(self.key, Input::Get, call, outcome);
        Some(value)
    }

    async fn cas(&self, etcd: &mut Client, expect: Option<String>) -> bool {
        self.issue();
        let compare = match &expect {
            Some(v) => Compare::value(self.key, CompareOp::Equal, v.as_str()),
            None => Compare::create_revision(self.key, CompareOp::Equal, 0),
        };
        let txn = Txn::new()
            .when([compare])
            .and_then([TxnOp::put(self.key, self.value, None)]);
        let call = self.traffic.recorder.now();
        let answer = etcd.txn(txn).await;
        let outcome = self.outcome(
            &format!("compare-and-swap {}", self.key),
            answer,
            |r| Output::Cas {
                succeeded: r.succeeded(),
            },
            |r| revision_of(r.header()),
        );
        if let (Output::Cas { succeeded: true }, Some(revision)) = outcome {
            self.ack(self.key, revision, Kind::Put);
        }
        let input = Input::Cas {
            expect,
            value: self.value.into(),
        };
        self.record(self.key, input, call, outcome)
    }

    async fn delete(&self, etcd: &mut Client) -> bool {
        let call = self.traffic.recorder.now();
        let answer = etcd.delete(self.key, None).await;
        let outcome = self.outcome(
            &format!("delete {}", self.key),
            answer,
            |r| Output::Delete {
                deleted: r.deleted() > 0,
            },
            |r| revision_of(r.header()),
        );
        if let (Output::Delete { deleted: true }, Some(revision)) = outcome {
            self.ack(self.key, revision, Kind::Delete);
        }
        self.record(self.key, Input::Delete, call, outcome)
    }

    /// One transaction putting two keys: the watch must deliver both in
    /// one response (atomicity).
    async fn atomic_pair(&self, etcd: &mut Client) -> bool {
        self.issue();
        let txn = Txn::new().and_then(ATOMIC.map(|k| TxnOp::put(k, self.value, None)));
        let call = self.traffic.recorder.now();
        let answer = etcd.txn(txn).await;
        let what = "a transaction putting two keys";
        let outcome = self.outcome(what, answer, |_| Output::Put, |r| revision_of(r.header()));
        for key in ATOMIC {
            if let (Output::Put, Some(revision)) = outcome {
                self.ack(key, revision, Kind::Put);
            }
            self.record(
                key,
                Input::Put {
                    value: self.value.into(),
                },
                call,
                outcome.clone(),
            );
        }
        outcome.0 != Output::Unknown
    }

    /// Grant, put a key of its own under the lease, keep it alive once,
    /// revoke. The revoke is recorded as a delete of that key: once it is
    /// acknowledged the key must be gone. If anything failed the delete is
    /// ambiguous (the lease may also expire on its own).
    async fn lease_cycle(&self, etcd: &mut Client, seq: usize) -> bool {
        let key = format!("{PREFIX}lease/c{}-{seq}", self.id);
        let mut counts = LeaseCounts::default();
        let grant = match etcd.lease_grant(LEASE_TTL, None).await {
            Ok(grant) => grant,
            Err(err) => {
                self.traffic.judge(self.id, "lease grant", &err);
                self.traffic.leases.lock().unwrap().failed += 1;
                return false;
            }
        };
        counts.granted += 1;
        self.issue();
        let call = self.traffic.recorder.now();
        let put = etcd
            .put(
                key.as_str(),
                self.value,
                Some(PutOptions::new().with_lease(grant.id())),
            )
            .await;
        let what = format!("put {key} with a lease");
        let put_outcome = self.outcome(&what, put, |_| Output::Put, |r| revision_of(r.header()));
        if let (Output::Put, Some(revision)) = put_outcome {
            self.ack(&key, revision, Kind::Put);
        }
        self.record(
            &key,
            Input::Put {
                value: self.value.into(),
            },
            call,
            put_outcome.clone(),
        );
        if keep_alive_once(etcd, grant.id()).await {
            counts.kept_alive += 1;
        }
        let revoke_call = self.traffic.recorder.now();
        let revoked = match etcd.lease_revoke(grant.id()).await {
            Ok(_) => true,
            Err(err) => {
                self.traffic.judge(self.id, "lease revoke", &err);
                false
            }
        };
        counts.revoked += usize::from(revoked);
        let outcome = match (revoked, put_outcome.0) {
            (true, Output::Put) => (Output::Delete { deleted: true }, None),
            _ => (Output::Unknown, None),
        };
        self.record(&key, Input::Delete, revoke_call, outcome);
        let mut total = self.traffic.leases.lock().unwrap();
        total.granted += counts.granted;
        total.kept_alive += counts.kept_alive;
        total.revoked += counts.revoked;
        total.failed += usize::from(!revoked);
        revoked
    }
}

/// One keepalive round trip; true if the lease was alive (TTL > 0).
async fn keep_alive_once(etcd: &mut Client, id: i64) -> bool {
    let round = async {
        let (mut keeper, mut stream) = etcd.lease_keep_alive(id).await.ok()?;
        keeper.keep_alive().await.ok()?;
        stream.message().await.ok()?.map(|r| r.ttl() > 0)
    };
    tokio::time::timeout(Duration::from_secs(3), round)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}

/// A watcher: every event under [`PREFIX`] after `after`, resumed from
/// its last revision + 1 (on the next member) whenever the stream breaks,
/// until it has reached `until` (0 while unknown). Events are numbered by
/// the response they arrived in, for the atomicity check.
pub struct Watcher {
    pub events: Mutex<Vec<Event>>,
    pub until: AtomicI64,
    pub resumed: AtomicI64,
    /// Watch the whole keyspace instead of [`PREFIX`].
    all_keys: bool,
}

impl Watcher {
    pub fn new() -> Arc<Watcher> {
        Watcher::with_scope(false)
    }

    /// A watcher of every key, to tell a revision written outside
    /// [`PREFIX`] from one that carries no event at all.
    pub fn of_all_keys() -> Arc<Watcher> {
        Watcher::with_scope(true)
    }

    fn with_scope(all_keys: bool) -> Arc<Watcher> {
        Arc::new(Watcher {
            events: Mutex::new(Vec::new()),
            until: AtomicI64::new(0),
            resumed: AtomicI64::new(0),
            all_keys,
        })
    }

    fn done(&self, next: i64) -> bool {
        let until = self.until.load(Ordering::Relaxed);
        until > 0 && next > until
    }

    /// Watches through the member in `slot`, moving to the next slot
    /// whenever the stream breaks (resuming on another member).
    pub async fn run(self: Arc<Self>, traffic: Arc<Traffic>, mut slot: usize, after: i64) {
        let mut next = after + 1;
        let mut response = 0u64;
        slot = slot.wrapping_sub(1);
        while !self.done(next) {
            slot = slot.wrapping_add(1);
            let Some(mut etcd) = traffic.connect_to(slot).await else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            let options = WatchOptions::new().with_start_revision(next);
            let (key, options) = match self.all_keys {
                true => ("\0", options.with_all_keys()),
                false => (PREFIX, options.with_prefix()),
            };
            let Ok(Ok(mut stream)) =
                tokio::time::timeout(Duration::from_secs(3), etcd.watch(key, Some(options))).await
            else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            self.resumed.fetch_add(1, Ordering::Relaxed);
            // A quiet stream is re-checked every second for the end.
            loop {
                match tokio::time::timeout(Duration::from_secs(1), stream.message()).await {
                    Ok(Ok(Some(message))) if !message.canceled() => {
                        response += 1;
                        next = self.take(&message, response).unwrap_or(next);
                    }
                    Ok(_) => break,
                    Err(_) if self.done(next) => return,
                    Err(_) => {}
                }
                if self.done(next) {
                    return;
                }
            }
        }
    }

    /// Stores the events of `message`; the revision to resume from.
    fn take(&self, message: &etcd_client::WatchResponse, response: u64) -> Option<i64> {
        let mut events = self.events.lock().unwrap();
        let mut last = None;
        for event in message.events() {
            let kv = event.kv()?;
            let kind = match event.event_type() {
                EventType::Put => Kind::Put,
                EventType::Delete => Kind::Delete,
            };
            events.push(Event {
                revision: kv.mod_revision(),
                key: kv.key_str().unwrap_or("").to_string(),
                kind,
                value: (kind == Kind::Put).then(|| kv.value_str().unwrap_or("").to_string()),
                response,
            });
            last = Some(kv.mod_revision() + 1);
        }
        last
    }
}

/// A lease kept alive for the whole run, with one key under it, to check
/// that faults (pauses above all) never expire a lease early: the key's
/// put is in the history, and unless keepalives once failed for longer
/// than the TTL (then an expiry is recorded as an ambiguous delete), the
/// final read must still find it.
pub async fn held_lease(traffic: Arc<Traffic>) {
    const TTL: i64 = 30;
    let key = format!("{PREFIX}held");
    let value = "held-by-lease".to_string();
    let mut member = 0;
    let (mut etcd, id) = loop {
        member += 1;
        if let Some(mut etcd) = traffic.connect_to(member).await {
            if let Ok(grant) = etcd.lease_grant(TTL, None).await {
                break (etcd, grant.id());
            }
        }
        tokio::time::sleep(BACKOFF).await;
    };
    let op = Op {
        id: crate::history::LEASE_HOLDER,
        key: &key,
        value: &value,
        traffic: &traffic,
    };
    op.issue();
    let call = traffic.recorder.now();
    let put = etcd
        .put(
            key.as_str(),
            value.as_str(),
            Some(PutOptions::new().with_lease(id)),
        )
        .await;
    let what = format!("put {key} with the held lease");
    let outcome = op.outcome(&what, put, |_| Output::Put, |r| revision_of(r.header()));
    if let (Output::Put, Some(revision)) = outcome {
        op.ack(&key, revision, Kind::Put);
    }
    op.record(
        &key,
        Input::Put {
            value: value.clone(),
        },
        call,
        outcome,
    );
    let mut last_alive = traffic.recorder.now();
    let limit = Duration::from_secs(TTL as u64 - 1).as_nanos() as u64;
    while !traffic.stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if keep_alive_once(&mut etcd, id).await {
            last_alive = traffic.recorder.now();
            continue;
        }
        if traffic.recorder.now() - last_alive > limit {
            // Kept alive too seldom: the lease may lawfully expire.
            traffic.leases.lock().unwrap().held_may_expire = true;
            op.record(&key, Input::Delete, last_alive, (Output::Unknown, None));
            return;
        }
        member += 1;
        if let Some(next) = traffic.connect_to(member).await {
            etcd = next;
        }
    }
}
