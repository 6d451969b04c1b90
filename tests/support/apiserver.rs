//! `capstan-apiserver` and `capstan` run as real child processes, and
//! kubectl driven against them with an isolated kubeconfig and cache.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use super::api_requests::{Http, WatchEvents, WatchRead};
pub use super::kubectl::Kubectl;
use super::store::{http_get, StoreProcess};
use super::tls;
use super::watchdog::{self, Watchdog};
use super::{binary, free_port};
use capstan_apiserver::pki::Pki;

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

/// Whether `flags` turn the in-process controller manager off (then no
/// one makes the `default` ServiceAccounts).
fn runs_no_controller_manager(flags: &[&str]) -> bool {
    flags
        .iter()
        .any(|f| f.starts_with("--disable-controller-manager") && !f.ends_with("=false"))
}

fn spawn_logged(command: &mut Command, log: &Path) -> Child {
    let file = std::fs::File::create(log).expect("create a log file");
    command
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .expect("start the server under test")
}

/// The flags that make an API server on `port` serve HTTPS with the
/// certificates and keys of the cluster in `dir` (made once per folder,
/// so API servers sharing a folder share a CA and a token signing key),
/// and registers the port so the tests' clients speak TLS to it.
pub fn secure_flags(dir: &Path, port: u16) -> Vec<String> {
    let pki = tls::pki_in(dir);
    tls::register(port, &pki.dir);
    let path = |p: PathBuf| p.display().to_string();
    vec![
        "--secure-port".into(),
        port.to_string(),
        "--tls-cert-file".into(),
        path(pki.serving_cert()),
        "--tls-private-key-file".into(),
        path(pki.serving_key()),
        "--client-ca-file".into(),
        path(pki.client_ca()),
        "--service-account-signing-key-file".into(),
        path(pki.service_account_key()),
        "--service-account-key-file".into(),
        path(pki.service_account_key()),
    ]
}

/// The flag that makes an API server publish the CA of the cluster in
/// `dir` as the `kube-root-ca.crt` ConfigMap in every namespace. Only the
/// tests of that publisher pass it, so that the others' ConfigMap
/// listings hold only what they made.
pub fn root_ca_flags(dir: &Path) -> Vec<String> {
    let pki = tls::pki_in(dir);
    vec![
        "--root-ca-file".into(),
        pki.server_ca().display().to_string(),
    ]
}

/// A child process killed when dropped; its test is under the watchdog
/// while it lives.
struct Killed(Child, #[allow(dead_code)] Watchdog);

impl Killed {
    fn new(child: Child) -> Killed {
        watchdog::track(child.id());
        Killed(child, watchdog::arm())
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        watchdog::untrack(self.0.id());
    }
}

/// Which etcd v3 store the API server runs on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Backend {
    /// This workspace's `capstan-store`.
    Capstan,
    /// A real etcd 3.4 (`etcd` on PATH, as scripts/install-deps.sh finds it).
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
        let mut command = Command::new("etcd");
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
        let mut process = Killed::new(child);
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
        command
            .args(["--etcd-servers", etcd_url, "--log-level", "warn"])
            .args(secure_flags(dir, port));
        let process = Killed::new(spawn_logged(&mut command, &log));
        wait_ready(port, &log);
        ApiServer { process, port, log }
    }

    pub fn pid(&self) -> u32 {
        self.process.0.id()
    }

    /// Starts an API server on several store endpoints (`urls`, in the
    /// order given) with `extra` flags, and waits until it is ready.
    pub fn start_with(urls: &[String], dir: &Path, name: &str, extra: &[&str]) -> ApiServer {
        ApiServer::start_with_env(urls, dir, name, extra, &[])
    }

    /// [`ApiServer::start_with`] with `env` set in its environment.
    pub fn start_with_env(
        urls: &[String],
        dir: &Path,
        name: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> ApiServer {
        let port = free_port();
        let log = dir.join(format!("{name}.log"));
        let mut command = Command::new(binary("capstan-apiserver"));
        command
            .args(["--etcd-servers", &urls.join(",")])
            .args(["--log-level", "info"])
            .args(secure_flags(dir, port))
            .args(extra)
            .envs(env.iter().copied());
        let process = Killed::new(spawn_logged(&mut command, &log));
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
        ApiCluster::start_with(backend, |_| Vec::new())
    }

    /// On `backend`, its API server given the flags `extra` makes from the
    /// cluster's folder.
    pub fn start_with(backend: Backend, extra: impl FnOnce(&Path) -> Vec<String>) -> ApiCluster {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let store = StoreBackend::start(backend, &dir.path().join("store"));
        let extra = extra(dir.path());
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let api = ApiServer::start_with(&[store.url()], dir.path(), "apiserver", &extra);
        let port = api.port;
        let kubectl = Kubectl::new(dir.path(), port);
        if !runs_no_controller_manager(&extra) {
            kubectl.wait_for_default_account();
        }
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
    /// The store member's client (gRPC) port.
    pub store_port: u16,
    pub kubectl: Kubectl,
}

impl Embedded {
    /// With no simulated nodes: the suite's tests expect a cluster with
    /// no nodes in it (tests/scheduling.rs runs capstan's defaults).
    pub fn start() -> Embedded {
        Embedded::start_with(&["--simulated-nodes", "0"])
    }

    /// With `extra` flags after the harness's own.
    pub fn start_with(extra: &[&str]) -> Embedded {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let port = free_port();
        let data = dir.path().join("data");
        let log = dir.path().join("capstan.log");
        let store_port = free_port();
        let mut command = Command::new(binary("capstan"));
        command
            .arg("--data-dir")
            .arg(&data)
            .args(["--secure-port", &port.to_string()]);
        // capstan makes its certificates under its data folder at start.
        tls::register(port, &data.join("pki"));
        tls::register_store(store_port, &data.join("pki"));
        command.args([
            "--store-port",
            &store_port.to_string(),
            "--peer-port",
            &free_port().to_string(),
            "--log-level",
            "warn",
        ]);
        command.args(extra);
        let process = Killed::new(spawn_logged(&mut command, &log));
        wait_ready(port, &log);
        let kubectl = Kubectl {
            kubeconfig: data.join("kubeconfig"),
            cache_dir: dir.path().join("kube-cache"),
        };
        if !runs_no_controller_manager(extra) {
            kubectl.wait_for_default_account();
        }
        Embedded {
            process,
            dir,
            port,
            store_port,
            kubectl,
        }
    }

    pub fn pid(&self) -> u32 {
        self.process.0.id()
    }

    /// The embedded store's client URL (TLS with the store's own CA).
    pub fn store_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.store_port)
    }

    /// etcd-client options for the embedded store: its CA and the store
    /// client certificate `capstan` made.
    pub fn store_connect_options(&self) -> etcd_client::ConnectOptions {
        etcd_client::ConnectOptions::new().with_tls(tls::store_tls_options(&self.pki()))
    }

    /// The certificates `capstan` made under its data folder.
    pub fn pki(&self) -> Pki {
        Pki::at(&self.dir.path().join("data").join("pki"))
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
