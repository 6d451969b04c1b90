//! `capstan-apiserver` and `capstan` run as real child processes, and
//! kubectl driven against them with an isolated kubeconfig and cache.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::store::{http_get, StoreProcess};
use super::{binary, free_port};

/// Waits until `/readyz` answers 200 (the store is reachable and the
/// system namespaces exist), or panics with the log.
fn wait_ready(port: u16, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if http_get(port, "/readyz").is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "API server did not become ready; log:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

fn spawn_logged(command: &mut Command, log: &Path) -> Child {
    let file = std::fs::File::create(log).expect("create a log file");
    command
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .expect("start the server under test")
}

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Which etcd v3 store the API server runs on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Backend {
    /// This workspace's `capstan-store`.
    Capstan,
    /// Debian's etcd 3.4 at /usr/bin/etcd.
    Etcd,
}

/// Both backends, for tests that must pass on each.
pub const BACKENDS: [Backend; 2] = [Backend::Capstan, Backend::Etcd];

/// A real etcd 3.4, a single member on free loopback ports with its data
/// in `data_dir`; killed when dropped.
pub struct EtcdProcess {
    process: Killed,
    data_dir: PathBuf,
    pub client_port: u16,
    peer_port: u16,
    pub log: PathBuf,
}

impl EtcdProcess {
    pub fn start(data_dir: &Path) -> EtcdProcess {
        let client_port = free_port();
        let peer_port = free_port();
        let log = data_dir.with_extension("log");
        let process = EtcdProcess::spawn(data_dir, client_port, peer_port, &log);
        EtcdProcess {
            process,
            data_dir: data_dir.to_path_buf(),
            client_port,
            peer_port,
            log,
        }
    }

    fn spawn(data_dir: &Path, client_port: u16, peer_port: u16, log: &Path) -> Killed {
        let client = format!("http://127.0.0.1:{client_port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let mut command = Command::new("/usr/bin/etcd");
        command
            .arg("--name")
            .arg("default")
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("default={peer}")]);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("open the etcd log");
        let child = command
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start etcd");
        let mut process = Killed(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if http_get(client_port, "/health").is_some_and(|b| b.contains("true")) {
                break;
            }
            if let Ok(Some(status)) = process.0.try_wait() {
                panic!(
                    "etcd exited ({status}); log:\n{}",
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "etcd did not become healthy; log:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        process
    }

    /// SIGKILL, then start again on the same data and ports.
    pub fn restart(&mut self) {
        let _ = self.process.0.kill();
        let _ = self.process.0.wait();
        std::thread::sleep(Duration::from_millis(500));
        self.process =
            EtcdProcess::spawn(&self.data_dir, self.client_port, self.peer_port, &self.log);
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    pub fn pid(&self) -> u32 {
        self.process.0.id()
    }
}

/// The store under an API server: a `capstan-store` or a real etcd.
pub enum StoreBackend {
    Capstan(StoreProcess),
    Etcd(EtcdProcess),
}

impl StoreBackend {
    pub fn start(backend: Backend, data_dir: &Path) -> StoreBackend {
        match backend {
            Backend::Capstan => StoreBackend::Capstan(StoreProcess::start(data_dir, &[])),
            Backend::Etcd => StoreBackend::Etcd(EtcdProcess::start(data_dir)),
        }
    }

    pub fn url(&self) -> String {
        match self {
            StoreBackend::Capstan(store) => store.url(),
            StoreBackend::Etcd(etcd) => etcd.url(),
        }
    }

    /// SIGKILL the store and start it again on the same data and ports.
    pub fn kill9_and_restart(&mut self) {
        match self {
            StoreBackend::Capstan(store) => {
                store.kill9();
                std::thread::sleep(Duration::from_millis(500));
                store.restart();
            }
            StoreBackend::Etcd(etcd) => etcd.restart(),
        }
    }
}

/// One `capstan-apiserver` process on a store; killed when dropped.
pub struct ApiServer {
    process: Killed,
    pub port: u16,
    pub log: PathBuf,
}

impl ApiServer {
    /// Starts an API server on the store at `etcd_url`, logging to
    /// `<dir>/<name>.log`, and waits until it is ready.
    pub fn start(etcd_url: &str, dir: &Path, name: &str) -> ApiServer {
        let port = free_port();
        let log = dir.join(format!("{name}.log"));
        let mut command = Command::new(binary("capstan-apiserver"));
        command.args([
            "--etcd-servers",
            etcd_url,
            "--port",
            &port.to_string(),
            "--log-level",
            "warn",
        ]);
        let process = Killed(spawn_logged(&mut command, &log));
        wait_ready(port, &log);
        ApiServer { process, port, log }
    }

    pub fn pid(&self) -> u32 {
        self.process.0.id()
    }

    /// Starts an API server on several store endpoints (`urls`, in the
    /// order given) with `extra` flags, and waits until it is ready.
    pub fn start_with(urls: &[String], dir: &Path, name: &str, extra: &[&str]) -> ApiServer {
        let port = free_port();
        let log = dir.join(format!("{name}.log"));
        let mut command = Command::new(binary("capstan-apiserver"));
        command
            .args(["--etcd-servers", &urls.join(",")])
            .args(["--port", &port.to_string(), "--log-level", "info"])
            .args(extra);
        let process = Killed(spawn_logged(&mut command, &log));
        wait_ready(port, &log);
        ApiServer { process, port, log }
    }

    /// Its log so far (for assertion messages).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// A `capstan-apiserver` in front of a store (a `capstan-store` or a real
/// etcd), each a process.
pub struct ApiCluster {
    // Fields drop in order: the API server, then the store, then the folder.
    pub api: ApiServer,
    pub store: StoreBackend,
    pub dir: tempfile::TempDir,
    pub port: u16,
    pub kubectl: Kubectl,
}

impl ApiCluster {
    /// On a `capstan-store`.
    pub fn start() -> ApiCluster {
        ApiCluster::start_on(Backend::Capstan)
    }

    pub fn start_on(backend: Backend) -> ApiCluster {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let store = StoreBackend::start(backend, &dir.path().join("store"));
        let api = ApiServer::start(&store.url(), dir.path(), "apiserver");
        let port = api.port;
        let kubectl = Kubectl::new(dir.path(), port);
        ApiCluster {
            api,
            store,
            dir,
            port,
            kubectl,
        }
    }

    /// Another API server on the same store (`name` names its log).
    pub fn add_apiserver(&self, name: &str) -> ApiServer {
        ApiServer::start(&self.store.url(), self.dir.path(), name)
    }

    pub fn pid(&self) -> u32 {
        self.api.pid()
    }
}

/// The embedded default, `capstan`, in a temporary data folder.
pub struct Embedded {
    process: Killed,
    pub dir: tempfile::TempDir,
    pub port: u16,
    pub kubectl: Kubectl,
}

impl Embedded {
    pub fn start() -> Embedded {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let port = free_port();
        let data = dir.path().join("data");
        let log = dir.path().join("capstan.log");
        let mut command = Command::new(binary("capstan"));
        command
            .arg("--data-dir")
            .arg(&data)
            .args(["--port", &port.to_string()]);
        command.args([
            "--store-port",
            &free_port().to_string(),
            "--peer-port",
            &free_port().to_string(),
            "--log-level",
            "warn",
        ]);
        let process = Killed(spawn_logged(&mut command, &log));
        wait_ready(port, &log);
        let kubectl = Kubectl {
            kubeconfig: data.join("kubeconfig"),
            cache_dir: dir.path().join("kube-cache"),
        };
        Embedded {
            process,
            dir,
            port,
            kubectl,
        }
    }

    pub fn pid(&self) -> u32 {
        self.process.0.id()
    }
}

/// kubectl with its own kubeconfig and discovery cache.
pub struct Kubectl {
    pub kubeconfig: PathBuf,
    pub cache_dir: PathBuf,
}

impl Kubectl {
    pub fn new(dir: &Path, port: u16) -> Kubectl {
        let kubeconfig = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster: {{server: \"http://127.0.0.1:{port}\"}}\n\
contexts:\n- name: t\n  context: {{cluster: t, user: t, namespace: default}}\ncurrent-context: t\nusers:\n- name: t\n  user: {{}}\n"
        );
        std::fs::write(&kubeconfig, text).expect("write a kubeconfig");
        Kubectl {
            kubeconfig,
            cache_dir: dir.join("kube-cache"),
        }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("kubectl");
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache_dir)
            .args(args);
        command
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run kubectl")
    }

    /// Runs kubectl, feeding `stdin`.
    pub fn run_with_input(&self, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl");
        child
            .stdin
            .take()
            .expect("piped")
            .write_all(stdin.as_bytes())
            .expect("write stdin");
        child.wait_with_output().expect("wait for kubectl")
    }

    /// stdout of a command that must succeed.
    pub fn ok(&self, args: &[&str]) -> String {
        checked(args, self.run(args))
    }

    /// `kubectl apply -f -` (or any `-f -` command) with `yaml`.
    pub fn ok_with_input(&self, args: &[&str], yaml: &str) -> String {
        checked(args, self.run_with_input(args, yaml))
    }

    /// stderr of a command that must fail.
    pub fn fails(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            !output.status.success(),
            "kubectl {args:?} should have failed; stdout:\n{}",
            String::from_utf8_lossy(&output.stdout)
        );
        String::from_utf8_lossy(&output.stderr).to_string()
    }
}

fn checked(args: &[&str], output: Output) -> String {
    assert!(
        output.status.success(),
        "kubectl {args:?} failed:\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).to_string()
}

/// A minimal HTTP/1.1 client on one kept-alive loopback connection, for
/// tests that need tight timing (kubectl's process start would hide a
/// lagging cache).
pub struct Http {
    reader: std::io::BufReader<std::net::TcpStream>,
}

impl Http {
    pub fn connect(port: u16) -> Http {
        let stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("set a read timeout");
        stream.set_nodelay(true).expect("no Nagle");
        Http {
            reader: std::io::BufReader::new(stream),
        }
    }

    /// Sends a request with an optional JSON body (`patch` sets the merge
    /// patch content type); the status and the JSON body.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        use std::io::Write;
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let content_type = match method {
            "PATCH" => "application/merge-patch+json",
            _ => "application/json",
        };
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\n\
             Content-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.reader
            .get_mut()
            .write_all(request.as_bytes())
            .expect("send a request");
        let (status, headers) = read_head(&mut self.reader);
        let bytes = if headers.contains("transfer-encoding: chunked") {
            let mut all = Vec::new();
            while let Some(chunk) = read_chunk(&mut self.reader) {
                all.extend(chunk);
            }
            all
        } else {
            let length = headers
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().expect("a length"));
            let mut bytes = vec![0; length];
            std::io::Read::read_exact(&mut self.reader, &mut bytes).expect("read a body");
            bytes
        };
        let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
        (status, json)
    }

    pub fn get(&mut self, path: &str) -> (u16, serde_json::Value) {
        self.request("GET", path, None)
    }
}

/// The status line's code and the lower-cased header block.
fn read_head(reader: &mut impl BufRead) -> (u16, String) {
    let mut status = String::new();
    reader.read_line(&mut status).expect("read a status line");
    let code = status
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP status line: {status:?}"));
    let mut headers = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("read a header");
        if line.trim().is_empty() {
            return (code, headers.to_lowercase());
        }
        headers.push_str(&line);
    }
}

/// One chunk of a chunked body; None after the last.
fn read_chunk(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut size = String::new();
    if reader.read_line(&mut size).ok()? == 0 {
        return None;
    }
    let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
    let mut chunk = vec![0; size + 2];
    reader.read_exact(&mut chunk).ok()?;
    chunk.truncate(size);
    (size > 0).then_some(chunk)
}

/// A watch request's event stream, one JSON event per line.
pub struct WatchEvents {
    reader: std::io::BufReader<std::net::TcpStream>,
    pending: Vec<u8>,
    ended: bool,
}

impl WatchEvents {
    /// Opens `GET <path>` (a `?watch=1` path) and checks for 200.
    pub fn open(port: u16, path: &str) -> WatchEvents {
        WatchEvents::connect(port).start(path)
    }

    /// A connection ready to send a watch request on, so that a test can
    /// connect first and ask right after a write.
    pub fn connect(port: u16) -> WatchEvents {
        WatchEvents {
            reader: Http::connect(port).reader,
            pending: Vec::new(),
            ended: false,
        }
    }

    pub fn start(mut self, path: &str) -> WatchEvents {
        use std::io::Write;
        write!(
            self.reader.get_mut(),
            "GET {path} HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\n\r\n"
        )
        .expect("send the watch");
        let (code, headers) = read_head(&mut self.reader);
        assert_eq!(code, 200, "watch {path}");
        if !headers.contains("transfer-encoding: chunked") {
            // A watch that ended before it began: one body, then nothing.
            let length = headers
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().expect("a length"));
            let mut body = vec![0; length];
            std::io::Read::read_exact(&mut self.reader, &mut body).expect("read a body");
            self.pending = body;
            self.pending.push(b'\n');
            self.ended = true;
        }
        self
    }

    /// The next event, or None if the stream ends or stays quiet for
    /// `timeout`.
    pub fn next(&mut self, timeout: Duration) -> Option<serde_json::Value> {
        self.reader
            .get_mut()
            .set_read_timeout(Some(timeout))
            .expect("set a read timeout");
        loop {
            if let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return Some(serde_json::from_slice(&line).expect("a JSON watch event"));
            }
            if self.ended {
                return None;
            }
            let chunk = read_chunk(&mut self.reader)?;
            self.pending.extend(chunk);
        }
    }
}

/// Runs each named test body twice: `capstan-apiserver` on a `capstan-store`
/// and on a real etcd 3.4. Bodies take a [`Backend`]; `async:` marks async
/// bodies, run on a multi-threaded tokio runtime.
#[macro_export]
macro_rules! on_both_backends {
    (async: $($name:ident),* $(,)?) => {
        mod capstan_store {
            use capstan_tests::apiserver::Backend;
            $(#[tokio::test(flavor = "multi_thread")]
            async fn $name() {
                super::$name(Backend::Capstan).await
            })*
        }
        mod etcd {
            use capstan_tests::apiserver::Backend;
            $(#[tokio::test(flavor = "multi_thread")]
            async fn $name() {
                super::$name(Backend::Etcd).await
            })*
        }
    };
    ($($name:ident),* $(,)?) => {
        mod capstan_store {
            use capstan_tests::apiserver::Backend;
            $(#[test]
            fn $name() {
                super::$name(Backend::Capstan)
            })*
        }
        mod etcd {
            use capstan_tests::apiserver::Backend;
            $(#[test]
            fn $name() {
                super::$name(Backend::Etcd)
            })*
        }
    };
}
