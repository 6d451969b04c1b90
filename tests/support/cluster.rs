//! A multi-member `capstan-store` cluster of real processes on loopback.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use capstan_apiserver::pki::Pki;

use super::store::http_get;
use super::tls;
use super::watchdog::{self, Watchdog};
use super::{binary, free_port};

/// One member: its ports, data dir and (while running) its process.
pub struct Member {
    pub name: String,
    pub client_port: u16,
    pub peer_port: u16,
    pub data_dir: PathBuf,
    /// `http`, or `https` for a member of a TLS cluster.
    scheme: &'static str,
    initial_cluster: String,
    state: &'static str,
    extra: Vec<String>,
    /// A member of the reference etcd instead of capstan-store.
    etcd: bool,
    child: Option<Child>,
    _watchdog: Watchdog,
}

impl Member {
    pub fn url(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.client_port)
    }

    pub fn peer_url(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.peer_port)
    }

    pub fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    pub fn start(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.data_dir.with_extension("log"))
            .expect("open member log");
        let child = self
            .command()
            .args(["--name", &self.name])
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(["--listen-client-urls", &self.url()])
            .args(["--listen-peer-urls", &self.peer_url()])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-state", self.state])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start capstan-store");
        watchdog::track(child.id());
        self.child = Some(child);
        self.break_puts_if_asked();
    }

    /// With `CAPSTAN_FAILPOINT_PUT_ERROR_EVERY=N` in the tests'
    /// environment, a member started with `--experimental-enable-failpoints`
    /// answers every Nth put with `Internal` after applying it (the
    /// store's `put-error-every` failpoint, set as soon as the member
    /// answers): a deliberately broken server for the fault suites to
    /// catch. Unset, nothing happens.
    fn break_puts_if_asked(&self) {
        let Ok(every) = std::env::var("CAPSTAN_FAILPOINT_PUT_ERROR_EVERY") else {
            return;
        };
        if !self
            .extra
            .iter()
            .any(|f| f == "--experimental-enable-failpoints")
        {
            return;
        }
        let path = "/debug/failpoints/put-error-every";
        let set = || {
            let mut connection = super::http::Connection::connect(self.client_port).ok()?;
            let response = connection.send("PUT", path, &[], every.as_bytes()).ok()?;
            (response.status == 200).then_some(())
        };
        let what = format!("{} to take PUT {path}", self.name);
        super::poll::wait_for(Duration::from_secs(60), &what, set);
    }

    /// capstan-store, or etcd with the flags it needs beyond capstan's
    /// (it advertises only what it is told to).
    fn command(&self) -> Command {
        if !self.etcd {
            return Command::new(binary("capstan-store"));
        }
        let mut command = Command::new("etcd");
        command
            .args(["--advertise-client-urls", &self.url()])
            .args(["--initial-advertise-peer-urls", &self.peer_url()]);
        command
    }

    /// The exit status of a member that was started and has stopped on
    /// its own (None while it runs, or when it was never started).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// SIGKILL and reap.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            watchdog::untrack(child.id());
        }
    }

    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("member is running").id();
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
    }

    pub fn metrics(&self) -> String {
        http_get(self.client_port, "/metrics").unwrap_or_default()
    }

    /// The value of a gauge or counter on `/metrics`, if the member
    /// answers (for an etcd member, etcd's `etcd_server_` gauge).
    pub fn gauge(&self, name: &str) -> Option<i64> {
        let metrics = self.metrics();
        let prefix = if self.etcd {
            "etcd_server"
        } else {
            "capstan_store"
        };
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{prefix}_{name} ")))
            .and_then(|value| value.trim().parse().ok())
    }

    /// Delays each of this member's raft log syncs by `millis` (0: none),
    /// the slow-disk failpoint; the member must run with
    /// `--experimental-enable-failpoints`.
    pub fn set_sync_delay(&self, millis: u64) -> Result<(), String> {
        let path = "/debug/failpoints/raft-log-sync-delay";
        let response = super::http::Connection::connect(self.client_port)
            .and_then(|mut c| c.send("PUT", path, &[], millis.to_string().as_bytes()))
            .map_err(|e| format!("PUT {path} on {}: {e}", self.name))?;
        match response.status {
            200 => Ok(()),
            status => Err(format!(
                "PUT {path} on {}: {status} {}",
                self.name,
                response.text()
            )),
        }
    }

    /// How many raft log syncs the slow-disk failpoint holds right now.
    pub fn syncs_waiting(&self) -> Option<u64> {
        let path = "/debug/failpoints/raft-log-sync-delay";
        let response = super::http::Connection::connect(self.client_port)
            .and_then(|mut c| c.send("GET", path, &[], b""))
            .ok()?;
        response.json().ok()?["syncsWaiting"].as_u64()
    }

    /// The running process's id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn is_leader(&self) -> bool {
        self.is_running() && self.gauge("is_leader") == Some(1)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.with_extension("log")).unwrap_or_default()
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.kill9();
    }
}

pub struct Cluster {
    pub members: Vec<Member>,
    dir: PathBuf,
    /// The certificates of a TLS cluster (clients and peers over https).
    pki: Option<Pki>,
}

/// etcd's TLS flags for member `name`: its own certificate for clients and
/// peers, and only certificates of the cluster's CA accepted from either.
fn member_tls_flags(pki: &Pki, name: &str) -> Vec<String> {
    let path = |p: PathBuf| p.display().to_string();
    let (cert, key, ca) = (
        path(pki.store_member_cert(name)),
        path(pki.store_member_key(name)),
        path(pki.store_ca()),
    );
    [
        ("--cert-file", &cert),
        ("--key-file", &key),
        ("--trusted-ca-file", &ca),
        ("--peer-cert-file", &cert),
        ("--peer-key-file", &key),
        ("--peer-trusted-ca-file", &ca),
    ]
    .into_iter()
    .flat_map(|(flag, value)| [flag.to_string(), value.clone()])
    .chain([
        "--client-cert-auth".into(),
        "--peer-client-cert-auth".into(),
    ])
    .collect()
}

impl Cluster {
    /// Starts `size` members of a new cluster in `dir` and waits for a leader.
    pub fn start(dir: &Path, size: usize, extra: &[&str]) -> Cluster {
        Cluster::start_with(dir, size, extra, None)
    }

    /// The same of the server under test: capstan-store, or the reference
    /// etcd when `CAPSTAN_TEST_SERVER=etcd` (`make test-store-on-etcd`).
    pub fn start_under_test(dir: &Path, size: usize, extra: &[&str]) -> Cluster {
        let mut cluster = Cluster::members_of(dir, size, extra, None);
        let etcd = super::store::on_reference_etcd();
        for member in &mut cluster.members {
            member.etcd = etcd;
        }
        cluster.start_members();
        cluster
    }

    /// The same over TLS: every member serves clients and peers with its
    /// own certificate from one CA made in `dir/pki`, and requires client
    /// certificates; the tests' clients (by port) use the store client
    /// certificate.
    pub fn start_tls(dir: &Path, size: usize, extra: &[&str]) -> Cluster {
        let pki = Pki::at(&dir.join("pki"));
        let names: Vec<(String, Vec<String>)> = (0..size)
            .map(|i| {
                (
                    format!("m{i}"),
                    vec!["127.0.0.1".into(), "localhost".into()],
                )
            })
            .collect();
        pki.ensure_store(&names)
            .expect("make the store's certificates");
        Cluster::start_with(dir, size, extra, Some(pki))
    }

    fn start_with(dir: &Path, size: usize, extra: &[&str], pki: Option<Pki>) -> Cluster {
        let mut cluster = Cluster::members_of(dir, size, extra, pki);
        cluster.start_members();
        cluster
    }

    /// The cluster's members, not started yet.
    fn members_of(dir: &Path, size: usize, extra: &[&str], pki: Option<Pki>) -> Cluster {
        let scheme = if pki.is_some() { "https" } else { "http" };
        let names: Vec<String> = (0..size).map(|i| format!("m{i}")).collect();
        let peer_ports: Vec<u16> = (0..size).map(|_| free_port()).collect();
        let initial_cluster = names
            .iter()
            .zip(&peer_ports)
            .map(|(name, port)| format!("{name}={scheme}://127.0.0.1:{port}"))
            .collect::<Vec<_>>()
            .join(",");
        let token = format!("test-{}", free_port());
        let mut extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        extra.extend(["--initial-cluster-token".to_string(), token.clone()]);
        let members = names
            .into_iter()
            .zip(peer_ports)
            .map(|(name, peer_port)| {
                let mut extra = extra.clone();
                let client_port = free_port();
                if let Some(pki) = &pki {
                    extra.extend(member_tls_flags(pki, &name));
                    tls::register_store(client_port, &pki.dir);
                }
                Member {
                    data_dir: dir.join(&name),
                    name,
                    client_port,
                    peer_port,
                    scheme,
                    initial_cluster: initial_cluster.clone(),
                    state: "new",
                    extra,
                    etcd: false,
                    child: None,
                    _watchdog: watchdog::arm(),
                }
            })
            .collect();
        Cluster {
            members,
            dir: dir.to_path_buf(),
            pki,
        }
    }

    /// Starts every member and waits until they all know a leader.
    fn start_members(&mut self) {
        for member in &mut self.members {
            member.start();
        }
        self.wait_for_leader(Duration::from_secs(20));
        self.wait_all_know_the_leader(Duration::from_secs(20));
    }

    /// One member leading is not enough to write through any member: a
    /// follower that has not heard from it yet answers "no leader".
    fn wait_all_know_the_leader(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while !self
            .members
            .iter()
            .all(|m| m.gauge("has_leader") == Some(1))
        {
            assert!(
                Instant::now() < deadline,
                "not every member knew the leader within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// All client URLs, for a client that may use any member.
    pub fn urls(&self) -> Vec<String> {
        self.members.iter().map(Member::url).collect()
    }

    pub fn running_urls(&self) -> Vec<String> {
        self.members
            .iter()
            .filter(|m| m.is_running())
            .map(Member::url)
            .collect()
    }

    pub fn leader(&self) -> Option<usize> {
        self.members.iter().position(Member::is_leader)
    }

    /// Waits until some running member leads; returns its index.
    pub fn wait_for_leader(&self, limit: Duration) -> usize {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(leader) = self.leader() {
                return leader;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let logs: Vec<String> = self.members.iter().map(Member::log).collect();
        panic!(
            "no leader within {limit:?}; logs:\n{}",
            logs.join("\n-----\n")
        );
    }

    /// A member of this cluster that is not started yet and joins with
    /// `--initial-cluster-state existing` (after `member add`).
    pub fn joiner(&self, name: &str) -> Member {
        assert!(
            self.pki.is_none(),
            "joining a TLS cluster is not supported here"
        );
        let peer_port = free_port();
        let mut initial_cluster: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url()))
            .collect();
        initial_cluster.push(format!("{name}=http://127.0.0.1:{peer_port}"));
        Member {
            name: name.to_string(),
            client_port: free_port(),
            peer_port,
            data_dir: self.dir.join(name),
            scheme: "http",
            initial_cluster: initial_cluster.join(","),
            state: "existing",
            // The founders' flags (with the cluster token), so a joiner
            // runs as they do.
            extra: self.members[0].extra.clone(),
            etcd: self.members[0].etcd,
            child: None,
            _watchdog: watchdog::arm(),
        }
    }
}
