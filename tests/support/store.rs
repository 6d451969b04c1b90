//! A `capstan-store` member run as a real child process.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{binary, free_port};

pub struct StoreProcess {
    pub data_dir: PathBuf,
    pub client_port: u16,
    pub peer_port: u16,
    extra_args: Vec<String>,
    child: Option<Child>,
    log_path: PathBuf,
}

impl StoreProcess {
    /// Starts a single-member store in `data_dir` with extra flags, and
    /// waits until it serves requests.
    pub fn start(data_dir: &Path, extra_args: &[&str]) -> StoreProcess {
        let mut process = StoreProcess {
            data_dir: data_dir.to_path_buf(),
            client_port: free_port(),
            peer_port: free_port(),
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            child: None,
            log_path: data_dir.with_extension("log"),
        };
        process.spawn();
        process
    }

    pub fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .expect("open store log");
        let child = Command::new(binary("capstan-store"))
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--listen-client-urls")
            .arg(self.url())
            .arg("--listen-peer-urls")
            .arg(format!("http://127.0.0.1:{}", self.peer_port))
            .args(&self.extra_args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start capstan-store");
        self.child = Some(child);
        self.wait_healthy();
    }

    /// Waits until `/health` answers true (a leader and a committed read).
    pub fn wait_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if http_get(self.client_port, "/health").is_some_and(|body| body.contains("true")) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("store did not become healthy; log:\n{}", self.log());
    }

    /// SIGKILL: no shutdown, no flush.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the process again on the same data dir and ports.
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    pub fn metrics(&self) -> String {
        http_get(self.client_port, "/metrics").unwrap_or_default()
    }
}

impl Drop for StoreProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A minimal HTTP/1.1 GET on loopback; None if the server is not up.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}
