//! `--workload heartbeats`: N simulated nodes hold their Leases against
//! `capstan` (each renewed every 10 s, so N/10 renewals a second), and the
//! bench reads what that costs capstan: CPU over a window that starts once
//! the renewals have spread over an interval, per core and per renewal,
//! for the whole process and for the API server's threads apart (the
//! target's measure: the store's threads are etcd's share in kube's
//! deployment). Every Lease must have been renewed inside the window.

use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::processes::Capstan;
use crate::apiserver::http::Connection;
use crate::checks::Checks;
use crate::cpu;

/// The kubelet's renewal interval (a quarter of the 40 s Lease).
const RENEW_INTERVAL: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct HeartbeatConfig {
    pub nodes: usize,
    pub window: Duration,
    pub startup_timeout: Duration,
    pub request_timeout: Duration,
    /// Say what runs, on stderr.
    pub progress: bool,
}

/// What the window measured.
struct Measured {
    capstan_cpu_s: f64,
    /// Of capstan's: its API server's threads (the HTTP workers and the
    /// resource actors' arbiters, whose requests call the store in process).
    apiserver_cpu_s: f64,
    /// Of capstan's: the store's own threads (the raft loop, the log and
    /// state writers, sled's, its serving and catch-up threads).
    store_cpu_s: f64,
    nodes_cpu_s: f64,
    renewed: usize,
}

/// capstan's threads that are its API server's.
fn is_apiserver_thread(name: &str) -> bool {
    name.starts_with("actix")
}

/// capstan's threads that are its store's.
fn is_store_thread(name: &str) -> bool {
    [
        "raft-",
        "state-",
        "sled-",
        "serve-",
        "compactor",
        "watch-catch-up",
    ]
    .iter()
    .any(|prefix| name.starts_with(prefix))
}

pub fn run(config: &HeartbeatConfig, checks: &mut Checks) -> Result<(), String> {
    if config.progress {
        eprintln!(
            "heartbeats: {} nodes, a {:?} window",
            config.nodes, config.window
        );
    }
    let mut capstan = Capstan::start(config.startup_timeout)?;
    let registration = config.startup_timeout.max(Duration::from_secs(30)) * 4;
    let nodes = capstan.start_nodes(config.nodes, registration)?;
    // Let the first renewals (spread over one interval) settle.
    std::thread::sleep(RENEW_INTERVAL + Duration::from_secs(2));
    let window_start = SystemTime::now();
    let pid = capstan.process.pid();
    let threads_before = cpu::sample(pid).unwrap_or_default();
    let capstan_before = capstan.process.cpu_seconds().unwrap_or(0.0);
    let nodes_before = nodes.cpu_seconds().unwrap_or(0.0);
    std::thread::sleep(config.window);
    let capstan_cpu_s = capstan.process.cpu_seconds().unwrap_or(0.0) - capstan_before;
    let threads_after = cpu::sample(pid).unwrap_or_default();
    let spent =
        |pick: fn(&str) -> bool| cpu::threads_cpu_seconds(&threads_before, &threads_after, pick);
    let measured = Measured {
        capstan_cpu_s,
        apiserver_cpu_s: spent(is_apiserver_thread),
        store_cpu_s: spent(is_store_thread),
        nodes_cpu_s: nodes.cpu_seconds().unwrap_or(0.0) - nodes_before,
        renewed: renewed_since(&capstan, window_start, config.request_timeout)?,
    };
    checks.record(
        "heartbeats: capstan still runs",
        capstan.process.running(),
        capstan.process.log_tail(5),
    );
    let all = measured.renewed >= config.nodes;
    checks.record(
        "heartbeats: every Lease renewed in the window",
        all,
        format!("{} of {} renewed", measured.renewed, config.nodes),
    );
    print!("{}", table(config, &measured));
    Ok(())
}

/// How many node Leases were renewed at or after `since`.
fn renewed_since(capstan: &Capstan, since: SystemTime, timeout: Duration) -> Result<usize, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let answer = runtime
        .block_on(
            Connection::new(capstan.plain_port, timeout)
                .get("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"),
        )
        .map_err(|e| e.to_string())?;
    let list: Value = serde_json::from_slice(&answer.body).map_err(|e| e.to_string())?;
    // RFC 3339 in UTC with microseconds sorts as text.
    let since = humantime::format_rfc3339_micros(since).to_string();
    Ok(list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|lease| {
                    lease["spec"]["renewTime"]
                        .as_str()
                        .is_some_and(|renewed| renewed >= since.as_str())
                })
                .count()
        })
        .unwrap_or(0))
}

fn table(config: &HeartbeatConfig, measured: &Measured) -> String {
    let window = config.window.as_secs_f64();
    let renewals = config.nodes as f64 * window / RENEW_INTERVAL.as_secs_f64();
    let mut out = String::from("heartbeats (simulated nodes holding their Leases)\n");
    out.push_str(&format!(
        "{:>6} {:>10} {:>12} {:>14} {:>16} {:>15} {:>12} {:>12}\n",
        "nodes",
        "window s",
        "renewals/s",
        "capstan cores",
        "capstan ms/renew",
        "API server cores",
        "store cores",
        "nodes cores"
    ));
    out.push_str(&format!(
        "{:>6} {:>10.0} {:>12.0} {:>14.3} {:>16.3} {:>15.3} {:>12.3} {:>12.3}\n",
        config.nodes,
        window,
        renewals / window,
        measured.capstan_cpu_s / window,
        measured.capstan_cpu_s * 1000.0 / renewals.max(1.0),
        measured.apiserver_cpu_s / window,
        measured.store_cpu_s / window,
        measured.nodes_cpu_s / window,
    ));
    out.push_str(
        "API server: capstan's HTTP workers and resource actors (their store calls in process \
         included); store: its raft, log, state and sled threads\n",
    );
    let verdict = match measured.apiserver_cpu_s / window < 0.20 {
        true => "met",
        false => "MISSED",
    };
    out.push_str(&format!(
        "target: the API server under 0.20 cores at 5,000 nodes: {verdict}\n"
    ));
    out
}
