//! Faults for a `capstan-store` cluster on loopback: network partitions of
//! the raft peer links (this file), a schedule of kills, pauses and
//! partitions (`schedule`), what shows each took effect (`proof`), and
//! the report of a run (`report`).
//!
//! A partition isolates one member from the others' peer ports. All
//! members share 127.0.0.1, so packets are told apart by port and by
//! process: each member runs in its own cgroup v2 group, and a chain of
//! iptables OUTPUT rules drops (1) everything to or from the isolated
//! member's peer port, which cuts what others send it, and (2) what the
//! isolated member's group sends to the others' peer ports, which cuts
//! what it sends. A socket belongs to the group its process was in when
//! the socket was made, so isolating also kills the member's open peer
//! connections (`ss -K`): they reconnect from inside the group, and drop.
//! Everything is undone when the `Network` drops, even on a panic.

pub mod apiserver;
pub mod membership;
pub mod proof;
pub mod report;
pub mod schedule;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::cluster::Cluster;

/// Where the cgroup v2 hierarchy is mounted: /sys/fs/cgroup on a pure v2
/// machine, /sys/fs/cgroup/unified on a hybrid one.
fn cgroup_root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        mounts
            .lines()
            .map(|line| line.split_whitespace().collect::<Vec<_>>())
            .find(|fields| fields.get(2) == Some(&"cgroup2"))
            .and_then(|fields| fields.get(1).map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("/sys/fs/cgroup"))
    })
}

#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    #[error("{command} failed: {detail}")]
    Command { command: String, detail: String },
    #[error("cgroup {path}: {source}")]
    Cgroup {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no running process for member {0}")]
    NoProcess(String),
}

/// The partition controls of one cluster: its iptables chain and groups.
pub struct Network {
    chain: String,
    groups: Vec<PathBuf>,
    /// The members' peer ports and data folders, by slot; a slot changes
    /// when its member is replaced.
    members: Mutex<Vec<(u16, PathBuf)>>,
    jumped: bool,
}

impl Network {
    /// Sets up (empty) controls for `cluster`'s members.
    pub fn new(cluster: &Cluster) -> Result<Network, FaultError> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let tag = format!(
            "{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let base = cgroup_root().join(format!("capstan-fault-{tag}"));
        let groups: Vec<PathBuf> = cluster.members.iter().map(|m| base.join(&m.name)).collect();
        let mut network = Network {
            chain: format!("CAPSTAN-FAULT-{tag}"),
            groups,
            members: Mutex::new(
                cluster
                    .members
                    .iter()
                    .map(|m| (m.peer_port, m.data_dir.clone()))
                    .collect(),
            ),
            jumped: false,
        };
        remove_stale();
        for group in &network.groups {
            std::fs::create_dir_all(group).map_err(|source| FaultError::Cgroup {
                path: group.clone(),
                source,
            })?;
        }
        iptables(&["-N", &network.chain])?;
        iptables(&["-I", "OUTPUT", "-j", &network.chain])?;
        network.jumped = true;
        Ok(network)
    }

    /// Cuts member `index` off from the others, both ways.
    pub fn isolate(&self, index: usize) -> Result<(), FaultError> {
        self.place_members()?;
        let peer_ports = self.peer_ports();
        let own = peer_ports[index].to_string();
        for flag in ["--dport", "--sport"] {
            self.drop_rule(&["-p", "tcp", flag, &own])?;
        }
        let group = self.group_path(index);
        for (other, port) in peer_ports.iter().enumerate() {
            if other != index {
                let port = port.to_string();
                self.drop_rule(&[
                    "-m", "cgroup", "--path", &group, "-p", "tcp", "--dport", &port,
                ])?;
            }
        }
        // Open sockets predate the group: reset them so they reconnect
        // from inside it (and are dropped).
        let filter = peer_ports
            .iter()
            .map(|p| format!("dport = :{p} or sport = :{p}"))
            .collect::<Vec<_>>()
            .join(" or ");
        run("ss", &["-K", "-t", &format!("( {filter} )")]).map(|_| ())
    }

    /// A one-way partition: member `index` hears nothing from the others
    /// (every packet to or from its peer port is dropped) while what it
    /// sends on its own links still arrives.
    pub fn deafen(&self, index: usize) -> Result<(), FaultError> {
        let own = self.peer_ports()[index].to_string();
        for flag in ["--dport", "--sport"] {
            self.drop_rule(&["-p", "tcp", flag, &own])?;
        }
        Ok(())
    }

    /// Cuts process `pid` (an API server) off from `ports` (a member's
    /// client port): its open connections there are reset and new ones
    /// dropped, while everyone else still reaches the member. Returns how
    /// many open connections were reset (0: it was not using the member).
    pub fn cut_process(&self, pid: u32, ports: &[u16]) -> Result<usize, FaultError> {
        let base = self.groups[0].parent().expect("groups have a parent");
        let group = base.join(format!("process-{pid}"));
        std::fs::create_dir_all(&group).map_err(|source| FaultError::Cgroup {
            path: group.clone(),
            source,
        })?;
        let procs = group.join("cgroup.procs");
        std::fs::write(&procs, pid.to_string()).map_err(|source| FaultError::Cgroup {
            path: procs,
            source,
        })?;
        let path = relative(&group);
        for port in ports {
            let port = port.to_string();
            self.drop_rule(&[
                "-m", "cgroup", "--path", &path, "-p", "tcp", "--dport", &port,
            ])?;
        }
        let local: Vec<u16> = connections(pid, ports).iter().map(|c| c.0).collect();
        if local.is_empty() {
            return Ok(0);
        }
        let filter = local
            .iter()
            .map(|p| format!("sport = :{p}"))
            .collect::<Vec<_>>()
            .join(" or ");
        let killed = run("ss", &["-K", "-t", &format!("( {filter} )")])?;
        Ok(killed.lines().skip(1).count())
    }

    /// Follows a member replaced in slot `index` (see `membership`).
    pub fn replace(&self, index: usize, peer_port: u16, data_dir: PathBuf) {
        self.members.lock().unwrap_or_else(|e| e.into_inner())[index] = (peer_port, data_dir);
    }

    fn peer_ports(&self) -> Vec<u16> {
        let members = self.members.lock().unwrap_or_else(|e| e.into_inner());
        members.iter().map(|(port, _)| *port).collect()
    }

    /// Packets the partition rules in force have dropped so far.
    pub fn dropped_packets(&self) -> u64 {
        let listing = run(
            "iptables",
            &["-w", "10", "-L", &self.chain, "-v", "-x", "-n"],
        );
        listing
            .unwrap_or_default()
            .lines()
            .skip(2)
            .filter_map(|line| line.split_whitespace().next()?.parse::<u64>().ok())
            .sum()
    }

    /// Removes every partition.
    pub fn heal(&self) -> Result<(), FaultError> {
        iptables(&["-F", &self.chain])
    }

    fn drop_rule(&self, matches: &[&str]) -> Result<(), FaultError> {
        let mut args = vec!["-A", self.chain.as_str()];
        args.extend_from_slice(matches);
        args.extend_from_slice(&["-j", "DROP"]);
        iptables(&args)
    }

    /// The group's path as iptables names it (relative to the v2 root).
    fn group_path(&self, index: usize) -> String {
        relative(&self.groups[index])
    }

    /// Moves each running member into its group (a restarted member is a
    /// new process, outside it).
    fn place_members(&self) -> Result<(), FaultError> {
        let members = self
            .members
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for ((_, dir), group) in members.iter().zip(&self.groups) {
            let pid =
                member_pid(dir).ok_or_else(|| FaultError::NoProcess(dir.display().to_string()))?;
            let procs = group.join("cgroup.procs");
            std::fs::write(&procs, pid.to_string()).map_err(|source| FaultError::Cgroup {
                path: procs,
                source,
            })?;
        }
        Ok(())
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        if self.jumped {
            let _ = iptables(&["-D", "OUTPUT", "-j", &self.chain]);
        }
        let _ = iptables(&["-F", &self.chain]);
        let _ = iptables(&["-X", &self.chain]);
        // Processes still running go back to the root so the groups can go.
        if let Some(base) = self.groups.first().and_then(|g| g.parent()) {
            remove_groups(base);
        }
    }
}

fn relative(group: &Path) -> String {
    group
        .strip_prefix(cgroup_root())
        .expect("groups live under the root")
        .display()
        .to_string()
}

/// Which of `remote` ports process `pid` has TCP connections to.
pub fn ports_in_use(pid: u32, remote: &[u16]) -> Vec<u16> {
    let mut used: Vec<u16> = connections(pid, remote).iter().map(|c| c.1).collect();
    used.sort_unstable();
    used.dedup();
    used
}

/// The (local, remote) ports of `pid`'s TCP connections to any of
/// `remote` ports on loopback, from /proc (the socket inodes its
/// descriptors hold, matched against /proc/net/tcp).
fn connections(pid: u32, remote: &[u16]) -> Vec<(u16, u16)> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten();
    let inodes: HashSet<String> = fds
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|link| {
            let link = link.to_str()?.to_string();
            Some(
                link.strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_string(),
            )
        })
        .collect();
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let port = |addr: &str| u16::from_str_radix(addr.rsplit(':').next()?, 16).ok();
            let (local, peer, inode) =
                (port(fields.get(1)?)?, port(fields.get(2)?)?, fields.get(9)?);
            (inodes.contains(*inode) && remote.contains(&peer)).then_some((local, peer))
        })
        .collect()
}

/// Removes the chains and groups of fault runs whose process is gone (a
/// run killed before its `Network` could drop).
fn remove_stale() {
    let alive = |tag: &str| {
        let pid = tag.split('-').next().unwrap_or("");
        Path::new("/proc").join(pid).exists()
    };
    let rules = run("iptables", &["-w", "10", "-S"]).unwrap_or_default();
    for chain in rules
        .lines()
        .filter_map(|l| l.strip_prefix("-N CAPSTAN-FAULT-"))
    {
        if !alive(chain) {
            let chain = format!("CAPSTAN-FAULT-{chain}");
            let _ = iptables(&["-D", "OUTPUT", "-j", &chain]);
            let _ = iptables(&["-F", &chain]);
            let _ = iptables(&["-X", &chain]);
        }
    }
    let groups = std::fs::read_dir(cgroup_root())
        .into_iter()
        .flatten()
        .flatten();
    for base in groups {
        let name = base.file_name().to_string_lossy().to_string();
        if name
            .strip_prefix("capstan-fault-")
            .is_some_and(|tag| !alive(tag))
        {
            remove_groups(&base.path());
        }
    }
}

/// Moves any process left in the groups under `base` back to the root,
/// and removes the groups.
fn remove_groups(base: &Path) {
    for group in std::fs::read_dir(base).into_iter().flatten().flatten() {
        if !group.path().is_dir() {
            continue;
        }
        let procs = std::fs::read_to_string(group.path().join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines() {
            let _ = std::fs::write(cgroup_root().join("cgroup.procs"), pid);
        }
        let _ = std::fs::remove_dir(group.path());
    }
    let _ = std::fs::remove_dir(base);
}

/// The pid of the `capstan-store` whose command line names `data_dir`.
pub fn member_pid(data_dir: &Path) -> Option<u32> {
    let wanted = data_dir.to_str()?;
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let mut args = cmdline.split(|b| *b == 0).map(String::from_utf8_lossy);
            let program = args.next()?;
            let mine = program.ends_with("capstan-store") && args.any(|a| a == wanted);
            mine.then_some(pid)
        })
}

fn iptables(args: &[&str]) -> Result<(), FaultError> {
    let mut all = vec!["-w", "10"];
    all.extend_from_slice(args);
    run("iptables", &all).map(|_| ())
}

fn run(program: &str, args: &[&str]) -> Result<String, FaultError> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| FaultError::Command {
            command: program.to_string(),
            detail: e.to_string(),
        })?;
    if !output.status.success() {
        return Err(FaultError::Command {
            command: format!("{program} {}", args.join(" ")),
            detail: String::from_utf8_lossy(&output.stderr).to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).to_string())
}
