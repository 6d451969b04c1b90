//! The conformance table (`conformance.rs`) against the etcd storage on
//! real store processes, started here on free loopback ports: the
//! reference `etcd` (on PATH; skipped, saying why, when there is none) and
//! this workspace's `capstan-store` (built when it is not there yet).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use super::conformance::{run_all, Backend};
use super::{Call, Connection, Store};

/// A store process, killed when dropped, and its data directory.
pub struct StoreProcess {
    pub connection: Connection,
    _child: Child,
    _dir: tempfile::TempDir,
}

impl StoreProcess {
    /// The etcd storage on it, compacted through etcd's Compact call.
    pub fn backend(&self) -> Backend {
        let connection = self.connection.clone();
        Backend {
            storage: Arc::new(Store::new(&self.connection)),
            compact: Box::new(move |revision| {
                let connection = connection.clone();
                Box::pin(async move { compact(&connection, revision).await })
            }),
        }
    }
}

pub async fn compact(connection: &Connection, revision: i64) {
    let compact = |client: etcd_client::Client| async move {
        client.kv_client().compact(revision, None).await
    };
    connection
        .unary(Call::Write, compact)
        .await
        .expect("compaction");
}

/// A free loopback port (bound, then released for the store to take).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("a bound address").port()
}

/// Why a test that needs a real etcd fails without one: the reference is
/// part of the test, so its absence is a failure, not a skip.
pub const NO_ETCD: &str = "no `etcd` binary on PATH (`make test` installs it)";

/// A real etcd, or None when there is no `etcd` on PATH.
pub async fn etcd() -> Option<StoreProcess> {
    let binary = which("etcd")?;
    let (client, peer) = (free_port(), free_port());
    let (client_url, peer_url) = (url(client), url(peer));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut command = Command::new(binary);
    command
        .arg("--data-dir")
        .arg(dir.path().join("etcd"))
        .args(["--listen-client-urls", &client_url])
        .args(["--advertise-client-urls", &client_url])
        .args(["--listen-peer-urls", &peer_url])
        .args(["--initial-advertise-peer-urls", &peer_url])
        .args(["--initial-cluster", &format!("default={peer_url}")]);
    Some(start(command, dir, client_url).await)
}

/// This workspace's `capstan-store`, one member.
pub async fn capstan_store() -> StoreProcess {
    let (client, peer) = (free_port(), free_port());
    let client_url = url(client);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut command = Command::new(store_binary());
    command
        .arg("--data-dir")
        .arg(dir.path().join("store"))
        .args(["--listen-client-urls", &client_url])
        .args(["--listen-peer-urls", &url(peer)]);
    start(command, dir, client_url).await
}

fn url(port: u16) -> String {
    format!("http://127.0.0.1:{port}")
}

async fn start(mut command: Command, dir: tempfile::TempDir, client_url: String) -> StoreProcess {
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the store starts");
    let connection = Connection::new(std::slice::from_ref(&client_url))
        .await
        .unwrap();
    let store = Store::new(&connection);
    let deadline = Instant::now() + Duration::from_secs(60);
    while store.current_revision().await.is_err() {
        assert!(
            Instant::now() < deadline,
            "the store at {client_url} did not answer within 60s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    StoreProcess {
        connection,
        _child: child,
        _dir: dir,
    }
}

/// `target/debug/capstan-store`, built first if it is not there.
fn store_binary() -> PathBuf {
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    let path = target.join("debug").join("capstan-store");
    if !path.exists() {
        let status = std::process::Command::new(env!("CARGO"))
            .args([
                "build",
                "-p",
                "capstan-store",
                "--bin",
                "capstan-store",
                "--quiet",
            ])
            .current_dir(&workspace)
            .status()
            .expect("run cargo build");
        assert!(status.success(), "building capstan-store failed");
    }
    path
}

fn which(binary: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(binary))
        .find(|candidate| candidate.is_file())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_etcd_storage_on_etcd_conforms() {
    let etcd = etcd().await.expect(NO_ETCD);
    run_all(&etcd.backend(), "/registry/conformance").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_etcd_storage_on_capstan_store_conforms() {
    let store = capstan_store().await;
    run_all(&store.backend(), "/registry/conformance").await;
}
