//! `capstan-apiserver` as a child process in front of one store under
//! test, on a free loopback port; killed (SIGKILL) and reaped on drop.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::servers::{die_with_parent, free_ports};

pub struct ApiProcess {
    pub port: u16,
    child: Child,
    log_path: PathBuf,
    _dir: TempDir,
}

impl ApiProcess {
    /// Starts an API server on the store at `endpoints` (comma-separated
    /// URLs) and waits until `/readyz` says ready.
    pub fn start(binary: &Path, endpoints: &str, timeout: Duration) -> Result<ApiProcess, String> {
        let dir = tempfile::Builder::new()
            .prefix("capstan-bench-apiserver-")
            .tempdir()
            .map_err(|e| format!("create a temporary directory: {e}"))?;
        let port = free_ports(1).map_err(|e| format!("find a free port: {e}"))?[0];
        let log_path = dir.path().join("apiserver.log");
        let log = File::create(&log_path).map_err(|e| format!("create the log: {e}"))?;
        let mut command = Command::new(binary);
        command
            .args(["--etcd-servers", endpoints, "--port", &port.to_string()])
            .args(["--log-level", "warn", "--etcd-compaction-interval", "0"])
            .stdout(Stdio::null())
            .stderr(log);
        die_with_parent(&mut command);
        let child = command
            .spawn()
            .map_err(|e| format!("start {}: {e}", binary.display()))?;
        let mut process = ApiProcess {
            port,
            child,
            log_path,
            _dir: dir,
        };
        process.wait_ready(timeout)?;
        Ok(process)
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "capstan-apiserver exited: {status}; log:\n{}",
                    self.log()
                ));
            }
            if ready(self.port) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!(
            "capstan-apiserver not ready within {timeout:?}; log:\n{}",
            self.log()
        ))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

fn ready(port: u16) -> bool {
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
