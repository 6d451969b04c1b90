//! The processes under test, each a child killed on drop (and by the
//! kernel if the bench dies first): `capstan` (store and API server in one
//! process, with a plain port on 127.0.0.1 for the bench's own requests),
//! `capstan-scheduler` and `capstan-nodes`, both on capstan's admin
//! kubeconfig over HTTPS as a user would run them.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::apiserver::process::ready;
use crate::servers::{die_with_parent, free_ports};

/// A child process and its log, killed when dropped.
pub struct Process {
    pub name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Process {
    pub(crate) fn spawn(
        name: &'static str,
        command: &mut Command,
        log: PathBuf,
    ) -> Result<Process, String> {
        let file = File::create(&log).map_err(|e| format!("create {}: {e}", log.display()))?;
        command.stdout(Stdio::null()).stderr(file);
        die_with_parent(command);
        let child = command.spawn().map_err(|e| format!("start {name}: {e}"))?;
        Ok(Process { name, child, log })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until `GET /readyz` on `port` answers 200.
    pub fn wait_ready(&mut self, port: u16, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "{} exited ({status}); log:\n{}",
                    self.name,
                    self.log_tail(30)
                ));
            }
            if ready(port) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!(
            "{} not ready within {timeout:?}; log:\n{}",
            self.name,
            self.log_tail(30)
        ))
    }

    /// Whether it still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// CPU seconds (user and system) it has used so far.
    pub fn cpu_seconds(&self) -> Option<f64> {
        crate::cpu::process_cpu_seconds(self.pid())
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where the binaries are: next to this executable.
pub fn binary(name: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("locate own executable: {e}"))?;
    Ok(exe.with_file_name(name))
}

/// A fresh `capstan` in a temporary folder, with nothing in process but
/// the store and the API server (no scheduler, no controller manager, no
/// simulated nodes): the bench starts what it measures apart.
pub struct Capstan {
    pub process: Process,
    /// The plain port on 127.0.0.1 (a superuser's) the bench's clients use.
    pub plain_port: u16,
    pub dir: TempDir,
}

impl Capstan {
    pub fn start(timeout: Duration) -> Result<Capstan, String> {
        let dir = tempfile::Builder::new()
            .prefix("capstan-bench-scheduling-")
            .tempdir()
            .map_err(|e| format!("temporary folder: {e}"))?;
        let ports = free_ports(4).map_err(|e| format!("free ports: {e}"))?;
        let mut command = Command::new(binary("capstan")?);
        command
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--secure-port", &ports[0].to_string()])
            .args(["--insecure-port", &ports[1].to_string()])
            .args(["--store-port", &ports[2].to_string()])
            .args(["--peer-port", &ports[3].to_string()])
            .args(["--simulated-nodes", "0", "--disable-scheduler", "true"])
            // The node lifecycle controller would taint the bench's nodes
            // (they hold no Leases); kube's scheduler_perf runs without it.
            .args(["--disable-controller-manager", "true"])
            .args(["--log-level", "warn", "--etcd-compaction-interval", "0"]);
        let log = dir.path().join("capstan.log");
        let mut process = Process::spawn("capstan", &mut command, log)?;
        process.wait_ready(ports[1], timeout)?;
        Ok(Capstan {
            process,
            plain_port: ports[1],
            dir,
        })
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("data").join("kubeconfig")
    }

    /// `capstan-scheduler` on this cluster, without leader election, with
    /// scheduler_perf's client limits (5,000 requests/s).
    pub fn start_scheduler(&self, timeout: Duration) -> Result<Process, String> {
        let port = free_ports(1).map_err(|e| format!("free port: {e}"))?[0];
        let mut command = Command::new(binary("capstan-scheduler")?);
        command
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(["--leader-elect", "false", "--kube-api-qps", "5000"])
            .args([
                "--kube-api-burst",
                "5000",
                "--secure-port",
                &port.to_string(),
            ]);
        let log = self.dir.path().join("scheduler.log");
        let mut process = Process::spawn("capstan-scheduler", &mut command, log)?;
        process.wait_ready(port, timeout)?;
        Ok(process)
    }

    /// `capstan-nodes` with `nodes` nodes on this cluster; ready once they
    /// are registered.
    pub fn start_nodes(&self, nodes: usize, timeout: Duration) -> Result<Process, String> {
        let port = free_ports(1).map_err(|e| format!("free port: {e}"))?[0];
        let mut command = Command::new(binary("capstan-nodes")?);
        command
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(["--nodes", &nodes.to_string(), "--kubelet-port", "0"])
            .args(["--healthz-port", &port.to_string()])
            .args(["--register-metrics-api", "false", "--log-level", "warn"]);
        let log = self.dir.path().join("nodes.log");
        let mut process = Process::spawn("capstan-nodes", &mut command, log)?;
        process.wait_ready(port, timeout)?;
        Ok(process)
    }
}
