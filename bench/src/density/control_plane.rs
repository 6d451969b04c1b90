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
    /// Requests per second (and burst) of every component's client...
    pub client_qps: u32,
    /// ...but the controller manager's.
    pub controller_qps: u32,
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

/// The controller manager's client limits, as its environment settings.
pub fn controller_rates(command: &mut Command, qps: u32) {
    command
        .env("CAPSTAN_KUBE_API_QPS", qps.to_string())
        .env("CAPSTAN_KUBE_API_BURST", qps.to_string());
}

impl ControlPlane {
    /// A control plane of processes started by `start.rs` or `cluster.rs`.
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
