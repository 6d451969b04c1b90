//! The scale run: many keys loaded into each server, then what a large
//! store costs: disk, memory, a page of a range, a count of everything,
//! a watch replaying old history, and a restart (kill -9) to healthy.

use std::time::{Duration, Instant};

use etcd_client::{Client, GetOptions, KvClient, WatchOptions};
use serde::Serialize;
use tokio::task::JoinSet;

use crate::client::{connect_clients, header_revision, within};
use crate::run_spec::KEY_PREFIX;
use crate::servers::{ServerKind, ServerProcess};

/// Concurrent writers while loading.
pub(crate) const WRITERS: usize = 64;
/// Connections the writers share.
const CONNECTIONS: usize = 16;
/// Keys per page of the range measurement, as a paging client asks.
const PAGE: i64 = 1_000;
/// Samples of each read measurement.
const SAMPLES: usize = 20;
/// Events of history replayed by the watch measurement, at most.
const REPLAY: usize = 200_000;

#[derive(Debug, Clone, Serialize)]
pub struct ScaleStats {
    pub server: ServerKind,
    pub keys: usize,
    pub load_s: f64,
    pub disk_bytes: u64,
    pub rss_bytes: Option<u64>,
    pub page_p50_ms: f64,
    pub count_p50_ms: f64,
    pub replay_events: usize,
    pub replay_events_per_s: f64,
    pub restart_s: Option<f64>,
    pub keys_after_restart: Option<i64>,
    /// RSS after each overwrite-and-compact round (see churn.rs).
    pub rss_by_round: Vec<u64>,
    /// A member added after everything else (see catch_up.rs).
    pub catch_up: Option<crate::catch_up::CatchUp>,
}

fn prefix() -> String {
    format!("{KEY_PREFIX}/scale/")
}

pub(crate) fn key(i: usize) -> String {
    format!("{}{i:09}", prefix())
}

/// Loads `keys` keys and measures the reads; the restart comes after.
pub async fn load_and_read(
    server: &ServerProcess,
    keys: usize,
    value_size: usize,
    timeout: Duration,
    progress: bool,
) -> Result<ScaleStats, String> {
    let clients = connect_clients(&server.endpoint(), CONNECTIONS, Some(timeout), timeout).await?;
    let started = Instant::now();
    let first_revision = load(&clients, keys, value_size, timeout, progress).await?;
    let load_s = started.elapsed().as_secs_f64();
    let mut kv = clients[0].kv_client();
    let page_p50_ms = page_latency(&mut kv, keys, timeout).await?;
    let count_p50_ms = count_latency(&mut kv, keys, timeout).await?;
    let (replay_events, replay_s) = replay(&clients[0], first_revision, keys, timeout).await?;
    Ok(ScaleStats {
        server: server.kind,
        keys,
        load_s,
        disk_bytes: server.disk_bytes(),
        rss_bytes: server.rss_bytes(),
        page_p50_ms,
        count_p50_ms,
        replay_events,
        replay_events_per_s: replay_events as f64 / replay_s.max(1e-9),
        restart_s: None,
        keys_after_restart: None,
        rss_by_round: Vec::new(),
        catch_up: None,
    })
}

/// How many scale keys a linearizable count finds (after the restart).
pub async fn count_keys(server: &ServerProcess, timeout: Duration) -> Result<i64, String> {
    let clients = connect_clients(&server.endpoint(), CONNECTIONS, Some(timeout), timeout).await?;
    let mut kv = clients[0].kv_client();
    let options = GetOptions::new().with_prefix().with_count_only();
    let response = within(timeout, kv.get(prefix(), Some(options))).await?;
    Ok(response.count())
}

/// Puts keys `0..keys` from `WRITERS` writers; returns the revision of the
/// first put (where the replay starts).
async fn load(
    clients: &[Client],
    keys: usize,
    value_size: usize,
    timeout: Duration,
    progress: bool,
) -> Result<i64, String> {
    let value = vec![b'v'; value_size];
    let mut kv = clients[0].kv_client();
    let first = within(timeout, kv.put(key(0), value.clone(), None)).await?;
    let mut writers = JoinSet::new();
    for writer in 0..WRITERS {
        let kv = clients[writer % clients.len()].kv_client();
        let value = value.clone();
        writers.spawn(write_share(kv, writer, (1, keys), value, timeout, progress));
    }
    while let Some(done) = writers.join_next().await {
        done.map_err(|err| format!("writer: {err}"))??;
    }
    Ok(header_revision(first.header()))
}

/// Puts this writer's share (every `WRITERS`th) of keys `from..keys`
/// with `value`; returns the newest revision it wrote (0 for none).
pub(crate) async fn write_share(
    mut kv: KvClient,
    writer: usize,
    (from, keys): (usize, usize),
    value: Vec<u8>,
    timeout: Duration,
    progress: bool,
) -> Result<i64, String> {
    let mut newest = 0;
    for i in (writer..keys).step_by(WRITERS).filter(|i| *i >= from) {
        let put = within(timeout, kv.put(key(i), value.clone(), None)).await?;
        newest = newest.max(header_revision(put.header()));
        if progress && writer == 0 && i % (WRITERS * 50_000) == 0 {
            eprintln!("  loaded about {i} keys");
        }
    }
    Ok(newest)
}

/// p50 of reading one page of `PAGE` keys from a spread of places.
async fn page_latency(kv: &mut KvClient, keys: usize, timeout: Duration) -> Result<f64, String> {
    let mut times = Vec::new();
    for sample in 0..SAMPLES {
        let start = key(sample * keys / SAMPLES);
        let options = GetOptions::new()
            .with_range(format!("{}~", prefix()))
            .with_limit(PAGE);
        let began = Instant::now();
        let page = within(timeout, kv.get(start, Some(options))).await?;
        times.push(began.elapsed());
        if page.kvs().is_empty() {
            return Err("a page of the scale keys came back empty".into());
        }
    }
    Ok(median_ms(times))
}

/// p50 of counting every key (`--count-only` over the whole prefix).
async fn count_latency(kv: &mut KvClient, keys: usize, timeout: Duration) -> Result<f64, String> {
    let mut times = Vec::new();
    for _ in 0..SAMPLES.min(5) {
        let options = GetOptions::new().with_prefix().with_count_only();
        let began = Instant::now();
        let counted = within(timeout, kv.get(prefix(), Some(options))).await?;
        times.push(began.elapsed());
        if counted.count() != keys as i64 {
            return Err(format!("counted {} keys, {keys} loaded", counted.count()));
        }
    }
    Ok(median_ms(times))
}

/// Watches from the first load revision until `REPLAY` events (or all)
/// came; returns how many and in how many seconds.
async fn replay(
    client: &Client,
    from: i64,
    keys: usize,
    timeout: Duration,
) -> Result<(usize, f64), String> {
    let wanted = keys.min(REPLAY);
    let mut client = client.clone();
    let options = WatchOptions::new().with_prefix().with_start_revision(from);
    let began = Instant::now();
    let mut stream = within(timeout, client.watch(prefix(), Some(options))).await?;
    let mut seen = 0;
    while seen < wanted {
        let message = tokio::time::timeout(timeout, stream.message())
            .await
            .map_err(|_| format!("replay stalled after {seen} events"))?;
        match message {
            Ok(Some(response)) => seen += response.events().len(),
            Ok(None) => return Err(format!("replay ended after {seen} events")),
            Err(err) => return Err(format!("replay: {err}")),
        }
    }
    Ok((seen, began.elapsed().as_secs_f64()))
}

fn median_ms(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1000.0
}

/// The printed table, one row per server.
pub fn table(stats: &[ScaleStats]) -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "scale     keys     load s  disk MB   RSS MB  page of 1000 ms  count ms  replay ev/s  restart s  keys after\n",
    );
    for s in stats {
        let mb = |bytes: u64| bytes as f64 / 1_048_576.0;
        let _ = writeln!(
            out,
            "{:<8} {:>8} {:>8.1} {:>8.1} {:>8} {:>16.2} {:>9.2} {:>12.0} {:>10} {:>11}",
            s.server.to_string(),
            s.keys,
            s.load_s,
            mb(s.disk_bytes),
            s.rss_bytes
                .map_or("-".into(), |rss| format!("{:.1}", mb(rss))),
            s.page_p50_ms,
            s.count_p50_ms,
            s.replay_events_per_s,
            s.restart_s.map_or("-".into(), |r| format!("{r:.2}")),
            s.keys_after_restart.map_or("-".into(), |k| k.to_string()),
        );
    }
    out.push_str("scale     RSS MB after each overwrite-and-compact round   new member: catch-up s  its disk MB\n");
    for s in stats {
        let mb = |bytes: u64| bytes as f64 / 1_048_576.0;
        let rounds: Vec<String> = s
            .rss_by_round
            .iter()
            .map(|r| format!("{:.1}", mb(*r)))
            .collect();
        let _ = writeln!(
            out,
            "{:<8} {:<47} {:>22} {:>12}",
            s.server.to_string(),
            rounds.join(" "),
            s.catch_up
                .as_ref()
                .map_or("-".into(), |c| format!("{:.2}", c.seconds)),
            s.catch_up
                .as_ref()
                .map_or("-".into(), |c| format!("{:.1}", mb(c.disk_bytes))),
        );
    }
    out
}
