//! `capstan-apiserver` as a child process in front of one store under
//! test, on a free loopback port; killed (SIGKILL) and reaped on drop, and
//! killed by the kernel if the bench dies first (`die_with_parent`).

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::error::ApiError;
use crate::servers::{die_with_parent, free_ports};

/// Log lines that mean the API server went wrong even if it still runs.
const ALARMS: [&str; 3] = ["panicked", "FATAL", "fatal runtime error"];

pub struct ApiProcess {
    pub port: u16,
    child: Child,
    log_path: PathBuf,
    // Declared last: removed after `Drop::drop` has killed the child.
    _dir: TempDir,
}

impl ApiProcess {
    /// Starts an API server on the store at `endpoints` (comma-separated
    /// URLs) and waits until `/readyz` says ready. Must be called from the
    /// main thread: the kernel's parent-death signal follows the thread
    /// that forked.
    pub fn start(
        binary: &Path,
        endpoints: &str,
        timeout: Duration,
    ) -> Result<ApiProcess, ApiError> {
        let dir = tempfile::Builder::new()
            .prefix("capstan-bench-apiserver-")
            .tempdir()
            .map_err(ApiError::TempDir)?;
        let port = free_ports(1).map_err(ApiError::Port)?[0];
        let log_path = dir.path().join("apiserver.log");
        let log = File::create(&log_path).map_err(|source| ApiError::Log {
            path: log_path.clone(),
            source,
        })?;
        let mut command = Command::new(binary);
        command
            .args([
                "--etcd-servers",
                endpoints,
                "--secure-port",
                "0",
                "--insecure-port",
                &port.to_string(),
            ])
            // No compaction mid-run: it would be measured as store noise.
            .args(["--log-level", "warn", "--etcd-compaction-interval", "0"])
            .args(match super::rbac::enabled() {
                true => {
                    super::rbac::flags(dir.path()).map_err(|e| ApiError::Rbac(e.to_string()))?
                }
                false => Vec::new(),
            })
            .args(super::audit::flags(dir.path()).map_err(|e| ApiError::Rbac(e.to_string()))?)
            .args(super::encryption::flags(dir.path()).map_err(|e| ApiError::Rbac(e.to_string()))?)
            .stdout(Stdio::null())
            .stderr(log);
        die_with_parent(&mut command);
        let child = command.spawn().map_err(|source| ApiError::Spawn {
            binary: binary.to_path_buf(),
            source,
        })?;
        let mut process = ApiProcess {
            port,
            child,
            log_path,
            _dir: dir,
        };
        process.wait_ready(timeout)?;
        if super::rbac::enabled() {
            let bound =
                super::rbac::bind_clients(port).map_err(|e| ApiError::Rbac(e.to_string()))?;
            if !bound.contains(" 201 ") {
                let why = format!("binding the bench clients answered {bound:?}");
                return Err(ApiError::Rbac(why));
            }
        }
        Ok(process)
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), ApiError> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                let log = self.log_tail(30);
                return Err(ApiError::Exited { status, log });
            }
            if ready(self.port) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let log = self.log_tail(30);
        Err(ApiError::NotReady { timeout, log })
    }

    /// Its process id (for its resident memory).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(lines).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// Log lines that report a panic or a fatal error.
    pub fn log_alarms(&self) -> Vec<String> {
        let log = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        log.lines()
            .filter(|line| ALARMS.iter().any(|alarm| line.contains(alarm)))
            .take(10)
            .map(str::to_string)
            .collect()
    }

    /// Why it is no longer running, if it is not.
    pub fn exit_status(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(None) => None,
            Ok(Some(status)) => Some(status.to_string()),
            Err(err) => Some(format!("cannot tell: {err}")),
        }
    }
}

/// One blocking GET /readyz; true on 200.
/// Whether `GET /readyz` on 127.0.0.1:`port` answers 200.
pub(crate) fn ready(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = "GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200")
}

impl Drop for ApiProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
