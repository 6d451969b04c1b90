//! `--workload heartbeats`: N simulated nodes hold their Leases against
//! `capstan` (each renewed every 10 s, so N/10 renewals a second), and the
//! bench reads what that costs capstan: CPU over a window that starts once
//! the renewals have spread over an interval, per core and per renewal.
//! Every Lease must have been renewed inside the window.

use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::processes::Capstan;
use crate::apiserver::http::Connection;
use crate::checks::Checks;

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
    nodes_cpu_s: f64,
    renewed: usize,
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
    let capstan_before = capstan.process.cpu_seconds().unwrap_or(0.0);
    let nodes_before = nodes.cpu_seconds().unwrap_or(0.0);
    std::thread::sleep(config.window);
    let measured = Measured {
        capstan_cpu_s: capstan.process.cpu_seconds().unwrap_or(0.0) - capstan_before,
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
        "{:>6} {:>10} {:>12} {:>14} {:>16} {:>14}\n",
        "nodes", "window s", "renewals/s", "capstan cores", "capstan ms/renew", "nodes cores"
    ));
    out.push_str(&format!(
        "{:>6} {:>10.0} {:>12.0} {:>14.3} {:>16.3} {:>14.3}\n",
        config.nodes,
        window,
        renewals / window,
        measured.capstan_cpu_s / window,
        measured.capstan_cpu_s * 1000.0 / renewals.max(1.0),
        measured.nodes_cpu_s / window,
    ));
    out.push_str("target: capstan under 0.20 cores at 5,000 nodes\n");
    out
}
