//! Watch fan-out: many watchers on one prefix while a writer puts to it at
//! a steady rate. Each put's value carries the moment it was sent, so every
//! event received gives one delivery latency; every watcher must see every
//! acknowledged put, once, in revision order.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Client, EventType, WatchOptions, WatchStream};
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::client::{connect_clients, within};
use crate::run_spec::{new_histogram, KEY_PREFIX};
use crate::servers::ServerKind;

/// Watch streams share this many connections, as clients of a real
/// cluster would (a watch is a stream on a shared HTTP/2 connection).
const CONNECTIONS: usize = 16;
/// How long the watchers may take to catch up once the writer stopped.
const DRAIN_LIMIT: Duration = Duration::from_secs(30);

pub struct FanoutSpec {
    pub server: ServerKind,
    pub endpoint: String,
    pub watchers: usize,
    pub writes_per_sec: u32,
    pub duration: Duration,
    pub request_timeout: Duration,
}

/// What one server's fan-out run measured.
#[derive(Debug, Clone, Serialize)]
pub struct FanoutStats {
    pub server: ServerKind,
    pub watchers: usize,
    pub writes: u64,
    /// Events received over all watchers (ideally `watchers * writes`).
    pub delivered: u64,
    /// Watchers that missed an event, saw one twice or out of order.
    pub incomplete_watchers: usize,
    pub delivered_per_sec: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    pub cpu_s_per_1k_events: Option<f64>,
}

/// What one watcher saw.
struct Seen {
    latency_us: Histogram<u64>,
    revisions: Vec<i64>,
}

pub async fn run(
    spec: FanoutSpec,
    server_cpu: impl Fn() -> Option<f64>,
) -> Result<FanoutStats, String> {
    let prefix = format!("{KEY_PREFIX}/fanout-{}/", spec.server);
    let conns = CONNECTIONS.min(spec.watchers.max(1));
    let clients = connect_clients(&spec.endpoint, conns, None, spec.request_timeout).await?;
    let epoch = Instant::now();
    let written = Arc::new(AtomicU64::new(u64::MAX));
    let mut watchers = Vec::with_capacity(spec.watchers);
    for at in 0..spec.watchers {
        let mut client = clients[at % clients.len()].clone();
        let options = WatchOptions::new().with_prefix();
        let stream = within(
            spec.request_timeout,
            client.watch(prefix.as_str(), Some(options)),
        )
        .await?;
        watchers.push(tokio::spawn(watch(stream, epoch, written.clone())));
    }
    let cpu_before = server_cpu();
    let started = Instant::now();
    let revisions = write(&spec, &clients[0], &prefix, epoch).await?;
    written.store(revisions.len() as u64, Ordering::Release);
    let mut latency = new_histogram();
    let mut delivered = 0;
    let mut incomplete = 0;
    for watcher in watchers {
        let seen = watcher.await.map_err(|err| format!("watcher: {err}"))?;
        delivered += seen.revisions.len() as u64;
        if seen.revisions != revisions {
            incomplete += 1;
        }
        latency
            .add(&seen.latency_us)
            .map_err(|err| err.to_string())?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = server_cpu()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    Ok(FanoutStats {
        server: spec.server,
        watchers: spec.watchers,
        writes: revisions.len() as u64,
        delivered,
        incomplete_watchers: incomplete,
        delivered_per_sec: delivered as f64 / elapsed,
        p50_us: latency.value_at_quantile(0.5),
        p99_us: latency.value_at_quantile(0.99),
        max_us: latency.max(),
        cpu_s_per_1k_events: cpu
            .filter(|_| delivered > 0)
            .map(|cpu| cpu * 1000.0 / delivered as f64),
    })
}

/// Puts at the spec's rate for its duration; returns each acknowledged
/// put's revision, in order. The value is the send time, in microseconds
/// since `epoch`.
async fn write(
    spec: &FanoutSpec,
    client: &Client,
    prefix: &str,
    epoch: Instant,
) -> Result<Vec<i64>, String> {
    let mut kv = client.kv_client();
    let mut ticks = tokio::time::interval(Duration::from_secs(1) / spec.writes_per_sec.max(1));
    let deadline = Instant::now() + spec.duration;
    let mut revisions = Vec::new();
    while Instant::now() < deadline {
        ticks.tick().await;
        let sent = epoch.elapsed().as_micros() as u64;
        let key = format!("{prefix}{}", revisions.len() % 100);
        let put = within(spec.request_timeout, kv.put(key, sent.to_string(), None)).await?;
        revisions.push(crate::client::header_revision(put.header()));
    }
    Ok(revisions)
}

/// Reads one watch stream until it has seen every write (known once the
/// writer stops) or the drain limit passes.
async fn watch(mut stream: WatchStream, epoch: Instant, written: Arc<AtomicU64>) -> Seen {
    let mut seen = Seen {
        latency_us: new_histogram(),
        revisions: Vec::new(),
    };
    let mut drain_deadline = None;
    loop {
        let expected = written.load(Ordering::Acquire);
        if seen.revisions.len() as u64 >= expected {
            return seen;
        }
        if expected != u64::MAX {
            let deadline = *drain_deadline.get_or_insert_with(|| Instant::now() + DRAIN_LIMIT);
            if Instant::now() >= deadline {
                return seen;
            }
        }
        // Wake now and then to notice that the writer has finished.
        let next = tokio::time::timeout(Duration::from_millis(200), stream.message()).await;
        let Ok(message) = next else { continue };
        let Ok(Some(response)) = message else {
            return seen;
        };
        let now = epoch.elapsed().as_micros() as u64;
        for event in response.events() {
            let Some(kv) = event.kv().filter(|_| event.event_type() == EventType::Put) else {
                continue;
            };
            seen.revisions.push(kv.mod_revision());
            if let Some(sent) = kv.value_str().ok().and_then(|v| v.parse::<u64>().ok()) {
                let _ = seen.latency_us.record(now.saturating_sub(sent).max(1));
            }
        }
    }
}

/// The printed table, with capstan/etcd ratios when both ran.
pub fn table(stats: &[FanoutStats]) -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "watch fan-out  watchers  writes   delivered  incomplete  events/s   p50 ms   p99 ms   max ms  cpu s/1k events\n",
    );
    for s in stats {
        let _ = writeln!(
            out,
            "{:<13} {:>9} {:>7} {:>11} {:>11} {:>9.0} {:>8.3} {:>8.3} {:>8.3} {:>16}",
            s.server.to_string(),
            s.watchers,
            s.writes,
            s.delivered,
            s.incomplete_watchers,
            s.delivered_per_sec,
            s.p50_us as f64 / 1000.0,
            s.p99_us as f64 / 1000.0,
            s.max_us as f64 / 1000.0,
            s.cpu_s_per_1k_events
                .map_or("-".to_string(), |cpu| format!("{cpu:.4}")),
        );
    }
    let find = |kind| stats.iter().find(|s| s.server == kind);
    if let (Some(c), Some(e)) = (find(ServerKind::Capstan), find(ServerKind::Etcd)) {
        let cpu = c
            .cpu_s_per_1k_events
            .zip(e.cpu_s_per_1k_events)
            .map_or(f64::NAN, |(c, e)| c / e);
        let _ = writeln!(
            out,
            "c/e: p50 {:.2}x, p99 {:.2}x, CPU per event {:.2}x (below 1 is better)",
            c.p50_us as f64 / e.p50_us.max(1) as f64,
            c.p99_us as f64 / e.p99_us.max(1) as f64,
            cpu
        );
    }
    out
}
