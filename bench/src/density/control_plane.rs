//! The control plane under test, started as a user starts it: `capstan`
//! (store, API server, controller manager and scheduler in one process),
//! or `make cluster`'s shape (three `capstan-store` members and two
//! `capstan-apiserver`s, each running the controllers and the scheduler,
//! one of each leading); then `capstan-nodes` with the simulated nodes.
//! Every process a child of the bench, killed when it drops.
//!
//! The clients of the control plane are given density-sized request
//! rates, as kube's own density runs give theirs (kube-controller-manager's
//! default of 20 requests/s would need 25 minutes for 30,000 pods): the
//! controller manager through its `CAPSTAN_KUBE_API_QPS` settings, the
//! scheduler through its KubeSchedulerConfiguration's `clientConnection`,
//! the nodes through `--kube-api-qps`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::scheduling::processes::{binary, Process};
use crate::servers::free_ports;

/// How the control plane runs.
#[derive(Debug, Clone)]
pub struct Shape {
    /// `make cluster`'s shape instead of one `capstan`.
    pub cluster: bool,
    /// Requests per second (and burst) of every component's client.
    pub client_qps: u32,
    pub startup_timeout: Duration,
}

pub struct ControlPlane {
    /// The processes, by name.
    pub processes: Vec<Process>,
    /// The plain port of the API server the bench's own clients use.
    pub port: u16,
    /// Plain ports of every API server, for their `/metrics`.
    pub metrics_ports: Vec<u16>,
    /// The admin kubeconfig (pointing at the API server at `port`).
    kubeconfig: PathBuf,
    /// The stores' data folders, for their size on disk.
    pub store_dirs: Vec<PathBuf>,
    pub dir: TempDir,
}

impl ControlPlane {
    pub fn start(shape: &Shape) -> Result<ControlPlane, String> {
        let dir = tempfile::Builder::new()
            .prefix("capstan-bench-density-")
            .tempdir()
            .map_err(|e| format!("temporary folder: {e}"))?;
        let scheduler_config = dir.path().join("scheduler.yaml");
        std::fs::write(&scheduler_config, scheduler_configuration(shape.client_qps))
            .map_err(|e| format!("write {}: {e}", scheduler_config.display()))?;
        match shape.cluster {
            false => start_single(shape, dir, &scheduler_config),
            true => super::cluster::start(shape, dir, &scheduler_config),
        }
    }

    /// `capstan-nodes` with `nodes` nodes in three zones, as the admin
    /// (its nodes act as `system:node:<name>`); returns once it serves
    /// its health endpoint (the nodes register in the background).
    pub fn start_nodes(&mut self, nodes: usize, shape: &Shape) -> Result<(), String> {
        let port = free_ports(1).map_err(|e| format!("free port: {e}"))?[0];
        let qps = shape.client_qps.to_string();
        let mut command = Command::new(binary("capstan-nodes")?);
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--nodes", &nodes.to_string(), "--kubelet-port", "0"])
            .args(["--zones", "zone-a,zone-b,zone-c"])
            .args(["--kube-api-qps", &qps, "--kube-api-burst", &qps])
            .args(["--healthz-port", &port.to_string()])
            .args(["--register-metrics-api", "false", "--log-level", "warn"]);
        let log = self.dir.path().join("nodes.log");
        let mut process = Process::spawn("capstan-nodes", &mut command, log)?;
        process.wait_ready(port, shape.startup_timeout)?;
        self.processes.push(process);
        Ok(())
    }

    /// (name, pid) of every process.
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.processes
            .iter()
            .map(|p| (p.name.to_string(), p.pid()))
            .collect()
    }

    /// The processes that exited, with their logs' tails.
    pub fn exited(&mut self) -> Vec<String> {
        self.processes
            .iter_mut()
            .filter_map(|p| (!p.running()).then(|| format!("{}:\n{}", p.name, p.log_tail(20))))
            .collect()
    }

    /// Kills (SIGKILL) the process named `name`.
    pub fn kill(&mut self, name: &str) -> bool {
        let before = self.processes.len();
        self.processes.retain(|p| p.name != name);
        before != self.processes.len()
    }

    /// Bytes on disk under the stores' data folders.
    pub fn store_bytes(&self) -> u64 {
        self.store_dirs.iter().map(|d| disk_bytes(d)).sum()
    }
}

/// kube-scheduler's configuration with density-sized client limits.
fn scheduler_configuration(qps: u32) -> String {
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
         clientConnection:\n  qps: {qps}\n  burst: {qps}\n"
    )
}

/// The controller manager's client limits, as its environment settings.
pub fn controller_rates(command: &mut Command, qps: u32) {
    command
        .env("CAPSTAN_KUBE_API_QPS", qps.to_string())
        .env("CAPSTAN_KUBE_API_BURST", qps.to_string());
}

fn start_single(
    shape: &Shape,
    dir: TempDir,
    scheduler_config: &Path,
) -> Result<ControlPlane, String> {
    let ports = free_ports(4).map_err(|e| format!("free ports: {e}"))?;
    let data = dir.path().join("data");
    let mut command = Command::new(binary("capstan")?);
    command
        .arg("--data-dir")
        .arg(&data)
        .args(["--secure-port", &ports[0].to_string()])
        .args(["--insecure-port", &ports[1].to_string()])
        .args(["--store-port", &ports[2].to_string()])
        .args(["--peer-port", &ports[3].to_string()])
        .args(["--simulated-nodes", "0", "--log-level", "warn"])
        .arg("--scheduler-config")
        .arg(scheduler_config);
    controller_rates(&mut command, shape.client_qps);
    let log = dir.path().join("capstan.log");
    let mut process = Process::spawn("capstan", &mut command, log)?;
    process.wait_ready(ports[1], shape.startup_timeout)?;
    Ok(ControlPlane {
        processes: vec![process],
        port: ports[1],
        metrics_ports: vec![ports[1]],
        kubeconfig: data.join("kubeconfig"),
        store_dirs: vec![data.join("store")],
        dir,
    })
}

impl ControlPlane {
    /// A control plane of processes started elsewhere in this module.
    pub(super) fn assemble(
        processes: Vec<Process>,
        port: u16,
        metrics_ports: Vec<u16>,
        kubeconfig: PathBuf,
        store_dirs: Vec<PathBuf>,
        dir: TempDir,
    ) -> ControlPlane {
        ControlPlane {
            processes,
            port,
            metrics_ports,
            kubeconfig,
            store_dirs,
            dir,
        }
    }
}

/// Waits until `check` holds, polling every 200 ms.
pub fn wait_until(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> bool,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(format!("{what}: not within {timeout:?}"))
}

fn disk_bytes(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => disk_bytes(&entry.path()),
            Ok(meta) => {
                use std::os::unix::fs::MetadataExt;
                // Allocated blocks, not the length: the raft log is preallocated.
                meta.blocks() * 512
            }
            Err(_) => 0,
        })
        .sum()
}
