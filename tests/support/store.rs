//! A `capstan-store` member run as a real child process.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::watchdog::{self, Watchdog};
use super::{binary, free_port};

/// A flag of `capstan-store` as the server under test spells it: etcd 3.4
/// still calls some of them experimental.
fn flag_for_server(flag: &str) -> &str {
    match flag {
        "--watch-progress-notify-interval" if on_reference_etcd() => {
            "--experimental-watch-progress-notify-interval"
        }
        other => other,
    }
}

/// Starts `capstan-store --restore-snapshot file` on a new data folder and
/// requires it to refuse to start; returns what it wrote to stderr.
pub fn refused_restore(data_dir: &Path, file: impl AsRef<Path>) -> String {
    let output = Command::new(binary("capstan-store"))
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--listen-client-urls")
        .arg(format!("http://127.0.0.1:{}", free_port()))
        .arg("--listen-peer-urls")
        .arg(format!("http://127.0.0.1:{}", free_port()))
        .arg("--restore-snapshot")
        .arg(file.as_ref())
        .output()
        .unwrap();
    assert!(
        !output.status.success(),
        "a damaged snapshot must not start a member"
    );
    String::from_utf8_lossy(&output.stderr).to_string()
}

/// Whether the store tests run against the reference etcd
/// (`CAPSTAN_TEST_SERVER=etcd`, found on PATH) instead of `capstan-store`.
pub fn on_reference_etcd() -> bool {
    std::env::var("CAPSTAN_TEST_SERVER").as_deref() == Ok("etcd")
}

pub struct StoreProcess {
    pub data_dir: PathBuf,
    pub client_port: u16,
    pub peer_port: u16,
    extra_args: Vec<String>,
    child: Option<Child>,
    log_path: PathBuf,
    /// Runs the reference etcd whatever `CAPSTAN_TEST_SERVER` says.
    etcd: bool,
    _watchdog: Watchdog,
}

impl StoreProcess {
    /// Starts a single-member store in `data_dir` with extra flags, and
    /// waits until it serves requests.
    pub fn start(data_dir: &Path, extra_args: &[&str]) -> StoreProcess {
        let mut process = StoreProcess::unstarted(data_dir, extra_args);
        process.spawn();
        process
    }

    /// A member with its ports chosen but not running yet (so that its
    /// data can be prepared for those ports first); [`StoreProcess::restart`]
    /// starts it.
    pub fn unstarted(data_dir: &Path, extra_args: &[&str]) -> StoreProcess {
        StoreProcess {
            data_dir: data_dir.to_path_buf(),
            client_port: free_port(),
            peer_port: free_port(),
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            child: None,
            log_path: data_dir.with_extension("log"),
            etcd: false,
            _watchdog: watchdog::arm(),
        }
    }

    /// Like [`StoreProcess::unstarted`], but the reference etcd (to move
    /// data between it and capstan).
    pub fn unstarted_etcd(data_dir: &Path) -> StoreProcess {
        let mut process = StoreProcess::unstarted(data_dir, &[]);
        process.etcd = true;
        process
    }

    pub fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
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
        let child = self
            .command()
            .args(self.extra_args.iter().map(|a| flag_for_server(a)))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start the server under test");
        watchdog::track(child.id());
        self.child = Some(child);
        self.wait_healthy();
    }

    /// The command line of the server under test: `capstan-store`, or the
    /// reference etcd when `CAPSTAN_TEST_SERVER=etcd` (to check that the
    /// tests themselves expect exactly etcd's behaviour).
    fn command(&self) -> Command {
        let peer_url = self.peer_url();
        if self.etcd || on_reference_etcd() {
            let mut command = Command::new("etcd");
            command
                .arg("--data-dir")
                .arg(&self.data_dir)
                .arg("--listen-client-urls")
                .arg(self.url())
                .arg("--advertise-client-urls")
                .arg(self.url())
                .arg("--listen-peer-urls")
                .arg(&peer_url)
                .arg("--initial-advertise-peer-urls")
                .arg(&peer_url)
                .arg("--initial-cluster")
                .arg(format!("default={peer_url}"));
            return command;
        }
        let mut command = Command::new(binary("capstan-store"));
        command
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--listen-client-urls")
            .arg(self.url())
            .arg("--listen-peer-urls")
            .arg(peer_url);
        command
    }

    /// Waits until `/health` answers true (a leader and a committed read).
    /// Panics if the process exited meanwhile (say it could not bind its
    /// ports), rather than trusting whoever else answers on the port.
    pub fn wait_healthy(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if http_get(self.client_port, "/health").is_some_and(|body| body.contains("true")) {
                // A failed bind exits at once; give it a moment to show.
                std::thread::sleep(Duration::from_millis(20));
                self.assert_running();
                return;
            }
            self.assert_running();
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("store did not become healthy; log:\n{}", self.log());
    }

    fn assert_running(&mut self) {
        let child = self.child.as_mut().expect("the store was started");
        if let Some(status) = child.try_wait().expect("poll the store process") {
            panic!(
                "the store exited ({status}) while starting; log:\n{}",
                self.log()
            );
        }
    }

    /// SIGKILL: no shutdown, no flush.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            watchdog::untrack(child.id());
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

/// The value of the unlabelled sample `name` in a Prometheus text scrape.
pub fn metric_value(scrape: &str, name: &str) -> Option<f64> {
    scrape.lines().find_map(|line| {
        let value = line.strip_prefix(name)?.strip_prefix(' ')?;
        value.trim().parse().ok()
    })
}

/// A store in its own temporary data directory, removed after the store
/// has been killed.
pub struct TempStore {
    // Declared first so that it is dropped (killed) before the directory.
    pub process: StoreProcess,
    pub dir: tempfile::TempDir,
}

impl TempStore {
    pub fn start(extra_args: &[&str]) -> TempStore {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let process = StoreProcess::start(&dir.path().join("store"), extra_args);
        TempStore { process, dir }
    }
}

impl std::ops::Deref for TempStore {
    type Target = StoreProcess;

    fn deref(&self) -> &StoreProcess {
        &self.process
    }
}

impl std::ops::DerefMut for TempStore {
    fn deref_mut(&mut self) -> &mut StoreProcess {
        &mut self.process
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
    if super::tls::pki_of(port).is_some() || super::tls::store_pki_of(port).is_some() {
        let mut connection = super::http::Connection::connect(port).ok()?;
        let response = connection.send("GET", path, &[], b"").ok()?;
        return (response.status == 200).then(|| response.text());
    }
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}
