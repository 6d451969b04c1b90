//! `--workload scheduler` and `--workload heartbeats`: the scheduler and
//! the simulated nodes against a real `capstan` (store and API server in
//! one process), each started fresh by the bench.
//!
//! - scheduler, in kube's scheduler_perf shape: N Ready nodes in three
//!   zones, then M pods created while no scheduler runs; then
//!   `capstan-scheduler` starts and the bench counts, through a pods watch,
//!   when each pod comes back bound: pods/s from the first binding seen to
//!   the last (the scheduling cycles and the binding writes), with the CPU
//!   seconds the scheduler and capstan spent, the steadier figure on a
//!   shared machine. One case per fresh cluster: SchedulingBasic,
//!   TopologySpreading, InterPodAffinity.
//! - heartbeats: `capstan-nodes` with N nodes holding their Leases
//!   (renewed every 10 s); capstan's CPU over a window once the renewals
//!   have spread, and a check that every Lease was renewed in it.
//!
//! - [`processes`]: the child processes; [`objects`]: nodes and pods;
//!   [`watch`]: the bound pods as a watch shows them; [`heartbeats`].

mod heartbeats;
mod objects;
pub(crate) mod processes;
mod watch;

use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::StatusCode;

use crate::apiserver::http::Connection;
use crate::checks::Checks;
pub use heartbeats::{run as run_heartbeats, HeartbeatConfig};
pub use objects::Case;
use processes::Capstan;

/// What one scheduler case measured.
#[derive(Debug, Clone)]
pub struct SchedulingStats {
    pub case: Case,
    pub nodes: usize,
    pub pods: usize,
    pub create_per_s: f64,
    pub bound_per_s: f64,
    pub scheduler_cpu_s: f64,
    pub capstan_cpu_s: f64,
}

/// The settings of the scheduling workloads.
#[derive(Debug, Clone)]
pub struct SchedulingConfig {
    pub nodes: usize,
    pub pods: usize,
    pub cases: Vec<Case>,
    pub clients: usize,
    pub startup_timeout: Duration,
    pub request_timeout: Duration,
    /// Say what runs, on stderr.
    pub progress: bool,
}

/// Runs every case on a fresh cluster and prints the table.
pub fn run_scheduler(config: &SchedulingConfig, checks: &mut Checks) -> Result<(), String> {
    let mut stats = Vec::new();
    for case in &config.cases {
        if config.progress {
            eprintln!(
                "scheduler {}: {} nodes, {} pods",
                case.name(),
                config.nodes,
                config.pods
            );
        }
        match run_case(config, *case) {
            Ok(measured) => {
                let target = case.target_pods_per_second();
                checks.record(
                    format!("scheduler {}: every pod bound", case.name()),
                    true,
                    format!("{:.0} pods/s (target {target:.0})", measured.bound_per_s),
                );
                stats.push(measured);
            }
            Err(err) => {
                checks.record(
                    format!("scheduler {}: every pod bound", case.name()),
                    false,
                    err,
                );
            }
        }
    }
    print!("{}", table(&stats));
    Ok(())
}

fn run_case(config: &SchedulingConfig, case: Case) -> Result<SchedulingStats, String> {
    // Processes start on the main thread (their parent-death signal
    // follows the thread that forked them).
    let capstan = Capstan::start(config.startup_timeout)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let port = capstan.plain_port;
    let timeout = config.request_timeout;
    runtime.block_on(post(
        port,
        "/api/v1/namespaces",
        objects::namespace(),
        timeout,
    ))?;
    // The controller manager is off (the scheduler alone is measured), so
    // the namespace's `default` ServiceAccount, without which the
    // ServiceAccount admission plugin refuses pods, is created here.
    let accounts = format!("/api/v1/namespaces/{}/serviceaccounts", objects::NAMESPACE);
    runtime.block_on(post(port, &accounts, objects::default_account(), timeout))?;
    runtime.block_on(create_nodes(port, config, timeout))?;
    let started = Instant::now();
    let pods_path = format!("/api/v1/namespaces/{}/pods", objects::NAMESPACE);
    let bodies: Vec<Bytes> = (0..config.pods).map(|i| objects::pod(case, i)).collect();
    runtime.block_on(create_all(
        port,
        &pods_path,
        bodies,
        config.clients,
        timeout,
    ))?;
    let create_per_s = config.pods as f64 / started.elapsed().as_secs_f64();
    let wait = Duration::from_secs(600);
    let watch = runtime.block_on(watch::start(port, objects::NAMESPACE, config.pods, wait))?;
    let capstan_before = capstan.process.cpu_seconds().unwrap_or(0.0);
    let mut scheduler = capstan.start_scheduler(config.startup_timeout)?;
    let times = runtime
        .block_on(watch.bound)
        .map_err(|_| "the watch task ended".to_string())??;
    let scheduler_cpu_s = scheduler.cpu_seconds().unwrap_or(0.0);
    let capstan_cpu_s = capstan.process.cpu_seconds().unwrap_or(0.0) - capstan_before;
    if !scheduler.running() {
        return Err(format!(
            "capstan-scheduler exited; log:\n{}",
            scheduler.log_tail(20)
        ));
    }
    let span = times
        .last
        .duration_since(times.first)
        .as_secs_f64()
        .max(1e-3);
    Ok(SchedulingStats {
        case,
        nodes: config.nodes,
        pods: config.pods,
        create_per_s,
        bound_per_s: config.pods as f64 / span,
        scheduler_cpu_s,
        capstan_cpu_s,
    })
}

async fn create_nodes(
    port: u16,
    config: &SchedulingConfig,
    timeout: Duration,
) -> Result<(), String> {
    let mut connection = Connection::new(port, timeout);
    let answer = connection
        .post("/api/v1/nodes", objects::node(0))
        .await
        .map_err(|e| e.to_string())?;
    if !objects::has_allocatable(&answer.body) {
        return Err("a node created with its status lost it: the nodes would not be Ready".into());
    }
    let bodies: Vec<Bytes> = (1..config.nodes).map(objects::node).collect();
    create_all(port, "/api/v1/nodes", bodies, config.clients, timeout).await
}

/// POSTs every body to `path` with `clients` connections at once.
async fn create_all(
    port: u16,
    path: &str,
    bodies: Vec<Bytes>,
    clients: usize,
    timeout: Duration,
) -> Result<(), String> {
    let queue = std::sync::Arc::new(std::sync::Mutex::new(bodies));
    let mut tasks: Vec<tokio::task::JoinHandle<Result<(), String>>> = Vec::new();
    for _ in 0..clients.max(1) {
        let queue = queue.clone();
        let path = path.to_string();
        tasks.push(tokio::spawn(async move {
            let mut connection = Connection::new(port, timeout);
            loop {
                let next = queue.lock().expect("queue").pop();
                let Some(body) = next else { return Ok(()) };
                expect_created(connection.post(&path, body).await, &path)?;
            }
        }));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}

async fn post(port: u16, path: &str, body: Bytes, timeout: Duration) -> Result<(), String> {
    expect_created(Connection::new(port, timeout).post(path, body).await, path)
}

fn expect_created(
    answer: Result<crate::apiserver::http::Answer, crate::apiserver::ApiError>,
    path: &str,
) -> Result<(), String> {
    let answer = answer.map_err(|e| e.to_string())?;
    match answer.status {
        StatusCode::CREATED => Ok(()),
        status => Err(format!(
            "POST {path}: {status}: {}",
            String::from_utf8_lossy(&answer.body)
        )),
    }
}

/// The scheduler cases, one row each.
pub fn table(stats: &[SchedulingStats]) -> String {
    if stats.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "scheduler (kube's scheduler_perf shape; pods created first, then capstan-scheduler started)\n",
    );
    out.push_str(&format!(
        "{:<18} {:>6} {:>7} {:>10} {:>10} {:>8} {:>12} {:>12} {:>14}\n",
        "case",
        "nodes",
        "pods",
        "create/s",
        "bound/s",
        "target",
        "sched CPU s",
        "capstan CPU s",
        "pods/sched-CPU-s"
    ));
    for s in stats {
        out.push_str(&format!(
            "{:<18} {:>6} {:>7} {:>10.0} {:>10.0} {:>8.0} {:>12.2} {:>12.2} {:>14.0}\n",
            s.case.name(),
            s.nodes,
            s.pods,
            s.create_per_s,
            s.bound_per_s,
            s.case.target_pods_per_second(),
            s.scheduler_cpu_s,
            s.capstan_cpu_s,
            s.pods as f64 / s.scheduler_cpu_s.max(1e-3),
        ));
    }
    out.push_str(
        "bound/s: pods over the time from the first binding seen in a pods watch to the last; \
         CPU: seconds the process spent from the scheduler's start to the last binding\n",
    );
    out
}
