//! The servers under test, run as child processes on free loopback ports in
//! fresh temporary data directories. A [`ServerProcess`] kills its child
//! when dropped, so every way out of the benchmark (success, error, panic,
//! Ctrl-C handled in `main`) stops the servers; on Linux the child also gets
//! SIGKILL if the benchmark itself dies without unwinding.

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::{cpu, health};

/// Attempts at starting a server, in case a port picked as free was taken
/// by someone else before the server bound it.
const START_ATTEMPTS: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerKind {
    Capstan,
    Etcd,
}

impl ServerKind {
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Capstan => "capstan",
            ServerKind::Etcd => "etcd",
        }
    }
}

impl fmt::Display for ServerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A running server; killed (SIGKILL) and reaped on drop, after which its
/// temporary directory (data and log) is removed.
/// With `members > 1` it is a whole cluster of that many processes.
pub struct ServerProcess {
    pub kind: ServerKind,
    binary: PathBuf,
    names: Vec<String>,
    peer_ports: Vec<u16>,
    initial_cluster: String,
    client_ports: Vec<u16>,
    children: Vec<Child>,
    log_paths: Vec<PathBuf>,
    /// The cores every process is pinned to (`--cores`), if any.
    pinned: Option<Vec<usize>>,
    // Declared last: dropped after `Drop::drop` has killed the child.
    _dir: TempDir,
}

impl ServerProcess {
    /// Starts a server of `kind` from `binary` and waits until `/health`
    /// reports healthy, for at most `startup_timeout` per attempt.
    pub fn start(
        kind: ServerKind,
        binary: &Path,
        startup_timeout: Duration,
        members: usize,
    ) -> Result<Self, String> {
        let mut last_error = String::new();
        for attempt in 1..=START_ATTEMPTS {
            match Self::start_once(kind, binary, startup_timeout, members) {
                Ok(server) => return Ok(server),
                Err(StartError::Fatal(err)) => return Err(err),
                Err(StartError::Retry(err)) => {
                    last_error = format!("{kind}: attempt {attempt}/{START_ATTEMPTS}: {err}");
                }
            }
        }
        Err(last_error)
    }

    fn start_once(
        kind: ServerKind,
        binary: &Path,
        startup_timeout: Duration,
        members: usize,
    ) -> Result<Self, StartError> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("capstan-bench-{kind}-"))
            .tempdir()
            .map_err(|err| StartError::Fatal(format!("create a temporary directory: {err}")))?;
        let ports = free_ports(2 * members)
            .map_err(|err| StartError::Fatal(format!("find free loopback ports: {err}")))?;
        let (client_ports, peer_ports) = ports.split_at(members);
        let names: Vec<String> = (0..members).map(|i| format!("bench-{kind}-{i}")).collect();
        let initial_cluster = names
            .iter()
            .zip(peer_ports)
            .map(|(name, port)| format!("{name}=http://127.0.0.1:{port}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut server = ServerProcess {
            kind,
            binary: binary.to_path_buf(),
            names: names.clone(),
            peer_ports: peer_ports.to_vec(),
            initial_cluster: initial_cluster.clone(),
            client_ports: client_ports.to_vec(),
            children: Vec::new(),
            log_paths: Vec::new(),
            pinned: None,
            _dir: dir,
        };
        for i in 0..members {
            let (child, log_path) = server.spawn(i, "log")?;
            server.children.push(child);
            server.log_paths.push(log_path);
        }
        server
            .wait_healthy(startup_timeout)
            .map_err(StartError::Retry)?;
        Ok(server)
    }

    /// Starts member `i` on its data directory, logging to `<name>.<log>`.
    fn spawn(&self, i: usize, log: &str) -> Result<(Child, PathBuf), StartError> {
        let name = &self.names[i];
        let member = Member {
            name,
            data_dir: self._dir.path().join(name),
            client_port: self.client_ports[i],
            peer_port: self.peer_ports[i],
            initial_cluster: &self.initial_cluster,
            state: "new",
            cores: self.pinned.as_deref(),
        };
        let log_path = self._dir.path().join(format!("{name}.{log}"));
        let child = spawn_member(self.kind, &self.binary, &member, &log_path)?;
        Ok((child, log_path))
    }

    /// Kills the first member (SIGKILL), starts it again on the same data,
    /// and returns how long it took from the start to healthy.
    pub fn restart_first(&mut self, timeout: Duration) -> Result<Duration, String> {
        let mut old = self.children.remove(0);
        let _ = old.kill();
        let _ = old.wait();
        let started = Instant::now();
        let (child, log_path) = self.spawn(0, "restart.log").map_err(StartError::message)?;
        self.children.insert(0, child);
        self.log_paths.push(log_path);
        self.wait_healthy(timeout)?;
        Ok(started.elapsed())
    }

    /// Starts a new member, to join after `member add` of its peer URL
    /// (see [`Joiner`]); it is killed with the server.
    pub fn start_joiner(&mut self, joiner: &Joiner) -> Result<(), String> {
        let initial_cluster = format!("{},{}", self.initial_cluster, joiner.entry());
        let member = Member {
            name: &joiner.name,
            data_dir: self._dir.path().join(&joiner.name),
            client_port: joiner.client_port,
            peer_port: joiner.peer_port,
            initial_cluster: &initial_cluster,
            state: "existing",
            cores: self.pinned.as_deref(),
        };
        let log_path = self._dir.path().join(format!("{}.log", joiner.name));
        let child = spawn_member(self.kind, &self.binary, &member, &log_path)
            .map_err(StartError::message)?;
        self.children.push(child);
        self.log_paths.push(log_path);
        Ok(())
    }

    /// Kills the member [`Self::start_joiner`] started (the last one).
    pub fn stop_joiner(&mut self) {
        if self.children.len() > self.names.len() {
            if let Some(mut child) = self.children.pop() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }

    /// Bytes a member's data directory takes on disk, by name.
    pub fn member_disk_bytes(&self, name: &str) -> u64 {
        disk_usage(&self._dir.path().join(name))
    }

    /// Resident memory of all the server's processes, from `/proc`.
    pub fn rss_bytes(&self) -> Option<u64> {
        self.children
            .iter()
            .map(|child| {
                let status =
                    std::fs::read_to_string(format!("/proc/{}/status", child.id())).ok()?;
                let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
                let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
                Some(kb * 1024)
            })
            .sum()
    }

    /// Bytes the first member's data directory takes on disk.
    pub fn disk_bytes(&self) -> u64 {
        disk_usage(&self._dir.path().join(&self.names[0]))
    }

    /// The endpoint etcd clients connect to.
    /// Comma-separated when the server is a cluster.
    pub fn endpoint(&self) -> String {
        self.endpoints().join(",")
    }

    /// Every member's client URL, the first member's first.
    pub fn endpoints(&self) -> Vec<String> {
        self.client_ports
            .iter()
            .map(|port| format!("http://127.0.0.1:{port}"))
            .collect()
    }

    fn all_healthy(&self) -> Result<(), String> {
        for port in &self.client_ports {
            match health::http_get(*port, "/health") {
                Ok(body) if health::is_healthy(&body) => {}
                Ok(body) => return Err(format!("/health on {port} said {}", body.trim())),
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    /// Polls `/health` until it reports `"health":"true"`; fails early if
    /// the process exits.
    fn wait_healthy(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let mut last = String::from("no answer yet");
        while Instant::now() < deadline {
            if let Some(status) = self.exit_status() {
                return Err(format!(
                    "{} exited during start-up ({status}); log tail:\n{}",
                    self.kind,
                    self.log_tail(20)
                ));
            }
            match self.all_healthy() {
                Ok(()) => return Ok(()),
                Err(err) => last = err,
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "{} not healthy after {:?} ({last}); log tail:\n{}",
            self.kind,
            timeout,
            self.log_tail(20)
        ))
    }

    /// Whether `/health` says healthy right now.
    pub fn healthy_now(&self) -> bool {
        self.all_healthy().is_ok()
    }

    /// The exit status, if the process has exited.
    pub fn exit_status(&mut self) -> Option<String> {
        self.children
            .iter_mut()
            .find_map(|child| match child.try_wait() {
                Ok(Some(status)) => Some(status.to_string()),
                Ok(None) => None,
                Err(err) => Some(format!("unknown ({err})")),
            })
    }

    /// CPU seconds (user + system) all of the server's processes have used
    /// so far, from `/proc/PID/stat`; None where that cannot be read.
    pub fn cpu_seconds(&self) -> Option<f64> {
        self.children
            .iter()
            .map(|child| cpu::process_cpu_seconds(child.id()))
            .sum()
    }

    /// Every process's threads and their CPU so far (see [`cpu::sample`]).
    pub fn cpu_samples(&self) -> Option<Vec<cpu::ProcessSample>> {
        self.children
            .iter()
            .map(|child| cpu::sample(child.id()))
            .collect()
    }

    /// Stops every member and starts it again on its data, pinned to
    /// `cores` from its first instruction on (a server sizes its thread
    /// pools by the cores it finds at start, as Go's runtime does for
    /// etcd); members started later (a restart, a joiner) are pinned too.
    pub fn restart_pinned(&mut self, cores: &[usize], timeout: Duration) -> Result<(), String> {
        self.kill();
        self.pinned = Some(cores.to_vec());
        let log = format!("cores-{}.log", cores.len());
        for i in 0..self.names.len() {
            let (child, log_path) = self.spawn(i, &log).map_err(StartError::message)?;
            self.children.push(child);
            self.log_paths.push(log_path);
        }
        self.wait_healthy(timeout)
    }

    pub fn log(&self) -> String {
        let mut text = String::new();
        for path in &self.log_paths {
            if let Ok(mut file) = File::open(path) {
                let _ = file.read_to_string(&mut text);
            }
        }
        text
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Lines of the log that show a panic or a fatal error.
    pub fn log_alarms(&self) -> Vec<String> {
        self.log()
            .lines()
            .filter(|line| {
                line.contains("panicked at")
                    || line.contains("\"level\":\"fatal\"")
                    || line.contains("\"level\":\"panic\"")
                    || line.contains(" FATAL ")
            })
            .take(5)
            .map(str::to_string)
            .collect()
    }

    fn kill(&mut self) {
        for mut child in self.children.drain(..) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Allocated bytes of every file under `dir`.
fn disk_usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => disk_usage(&entry.path()),
            Ok(meta) => meta.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

enum StartError {
    /// Starting again cannot help (no binary, no temp dir).
    Fatal(String),
    /// Maybe a port race; try again with new ports.
    Retry(String),
}

impl StartError {
    fn message(self) -> String {
        match self {
            StartError::Fatal(err) | StartError::Retry(err) => err,
        }
    }
}

/// `n` distinct free ports on 127.0.0.1, held together while picked so they
/// differ, then released for the servers to bind.
pub(crate) fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect()
}

/// A member to add to a running server: its name and ports.
pub struct Joiner {
    pub name: String,
    pub client_port: u16,
    pub peer_port: u16,
}

impl Joiner {
    pub fn new(kind: ServerKind) -> std::io::Result<Joiner> {
        let ports = free_ports(2)?;
        Ok(Joiner {
            name: format!("bench-{kind}-joiner"),
            client_port: ports[0],
            peer_port: ports[1],
        })
    }

    pub fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }

    pub fn client_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    fn entry(&self) -> String {
        format!("{}={}", self.name, self.peer_url())
    }
}

/// One member's place in the cluster under test.
struct Member<'a> {
    name: &'a str,
    data_dir: PathBuf,
    client_port: u16,
    peer_port: u16,
    initial_cluster: &'a str,
    /// `new` for a founding member, `existing` for one joining later.
    state: &'a str,
    /// The cores it may run on (`--cores`); all of ours when None.
    cores: Option<&'a [usize]>,
}

fn spawn_member(
    kind: ServerKind,
    binary: &Path,
    member: &Member,
    log_path: &Path,
) -> Result<Child, StartError> {
    let client_url = format!("http://127.0.0.1:{}", member.client_port);
    let peer_url = format!("http://127.0.0.1:{}", member.peer_port);
    let mut command = Command::new(binary);
    command
        .arg("--name")
        .arg(member.name)
        .arg("--data-dir")
        .arg(&member.data_dir)
        .arg("--listen-client-urls")
        .arg(&client_url)
        .arg("--advertise-client-urls")
        .arg(&client_url)
        .arg("--listen-peer-urls")
        .arg(&peer_url)
        .arg("--initial-advertise-peer-urls")
        .arg(&peer_url)
        .arg("--initial-cluster")
        .arg(member.initial_cluster)
        .arg("--initial-cluster-state")
        .arg(member.state);
    // Both servers read settings from their environment; keep the
    // comparison hermetic.
    let prefix = match kind {
        ServerKind::Capstan => "CAPSTAN_",
        ServerKind::Etcd => "ETCD_",
    };
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with(prefix) {
            command.env_remove(key);
        }
    }
    let log = File::create(log_path)
        .map_err(|err| StartError::Fatal(format!("create {}: {err}", log_path.display())))?;
    let log_err = log
        .try_clone()
        .map_err(|err| StartError::Fatal(format!("{}: {err}", log_path.display())))?;
    command.stdin(Stdio::null()).stdout(log).stderr(log_err);
    die_with_parent(&mut command);
    if let Some(cores) = member.cores {
        cpu::pin_at_start(&mut command, cores);
    }
    command.spawn().map_err(|err| {
        StartError::Fatal(format!(
            "start {kind} from `{}`: {err}{}",
            binary.display(),
            match kind {
                ServerKind::Capstan => " (build it with `cargo build --bins`, or pass --store-bin)",
                ServerKind::Etcd => " (install etcd, pass --etcd-bin, or use --skip-etcd)",
            }
        ))
    })
}

/// Asks Linux to SIGKILL the child if this process dies without running
/// destructors (e.g. it is itself SIGKILLed). Servers are started from the
/// main thread, which lives as long as the process.
#[cfg(target_os = "linux")]
pub(crate) fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches no memory of ours.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn die_with_parent(_command: &mut Command) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_differ() {
        let ports = free_ports(6).unwrap();
        let distinct: std::collections::HashSet<_> = ports.iter().collect();
        assert_eq!(distinct.len(), 6);
    }
}
