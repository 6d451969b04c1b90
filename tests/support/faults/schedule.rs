//! A schedule of faults injected one after another into a store cluster
//! while traffic runs, and the report of a run: operations, faults,
//! failover times and violations.
//!
//! Each fault is held for a while, healed, and the schedule then waits
//! (with a deadline) until the cluster has a leader and some write called
//! after the injection was acknowledged, so every fault is survived before
//! the next one starts. Failover times are measured afterwards from the
//! history, not asserted: speed belongs to the benchmarks.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use super::apiserver::ApiProcess;
use super::{membership, Network};
use crate::checker::verify::Findings;
use crate::cluster::Cluster;
use crate::history::{self, Operation, Recorder};
use crate::poll::wait_for;

/// Generous: a 2-core machine shared with builds can be slow to elect.
const RECOVERY: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    /// SIGKILL, then start again on the same data.
    KillLeader,
    KillFollower,
    /// SIGKILL of every member at once, then all started again.
    KillAll,
    /// SIGSTOP, then SIGCONT.
    PauseLeader,
    PauseFollower,
    /// The member cut off from the others' peer links, then healed.
    IsolateLeader,
    IsolateFollower,
    /// A one-way partition: the leader hears nothing from its peers while
    /// its own messages still reach them.
    DeafenLeader,
    /// An API server cut off from the leader's client port (the others
    /// still reach it); needs API servers.
    CutApiServerFromLeader,
    /// SIGKILL of an API server, started again on the same port.
    KillApiServer,
    /// A membership change: a follower removed, wiped, and replaced by a
    /// new member that catches up from the others.
    ReplaceFollower,
    /// A slow disk: every raft log sync (the fsync behind each
    /// acknowledgement) waits [`SLOW_DISK_MS`] first, through the store's
    /// failpoint; needs members started with
    /// `--experimental-enable-failpoints`.
    SlowDiskLeader,
    SlowDiskFollower,
}

/// How long each raft log sync waits while a slow-disk fault holds: far
/// beyond a real disk's fsync, well within a client's timeout.
pub const SLOW_DISK_MS: u64 = 400;

impl FaultKind {
    /// Whether the fault takes the leader away, so writes stop until a
    /// leader is elected (or the old one is back).
    /// Whether the fault needs the partition controls (a [`Network`]).
    pub fn needs_network(self) -> bool {
        matches!(
            self,
            FaultKind::IsolateLeader
                | FaultKind::IsolateFollower
                | FaultKind::DeafenLeader
                | FaultKind::CutApiServerFromLeader
        )
    }

    /// Whether the fault is done to an API server.
    pub fn needs_api_servers(self) -> bool {
        matches!(
            self,
            FaultKind::CutApiServerFromLeader | FaultKind::KillApiServer
        )
    }

    pub fn hits_leader(self) -> bool {
        matches!(
            self,
            FaultKind::KillLeader
                | FaultKind::KillAll
                | FaultKind::PauseLeader
                | FaultKind::IsolateLeader
                | FaultKind::DeafenLeader
        )
    }
}

/// Every kind, in the order a schedule cycles through them.
pub const EVERY_FAULT: [FaultKind; 11] = [
    FaultKind::KillLeader,
    FaultKind::IsolateFollower,
    FaultKind::SlowDiskLeader,
    FaultKind::PauseLeader,
    FaultKind::ReplaceFollower,
    FaultKind::KillFollower,
    FaultKind::IsolateLeader,
    FaultKind::SlowDiskFollower,
    FaultKind::PauseFollower,
    FaultKind::DeafenLeader,
    FaultKind::KillAll,
];

/// One injected fault, on the history's clock (nanoseconds).
#[derive(Debug, Clone)]
pub struct FaultRecord {
    pub kind: FaultKind,
    pub member: Option<usize>,
    pub injected: u64,
    pub healed: u64,
}

/// How long and how hard: from `CAPSTAN_FAULT_SECONDS` (default 30);
/// `CAPSTAN_FAULT_PARTITIONS=0` leaves partitions out, for a machine
/// where the test cannot use iptables and cgroups (not root).
#[derive(Debug, Clone)]
pub struct Settings {
    pub duration: Duration,
    /// How long each fault lasts.
    pub hold: Duration,
    /// Quiet time between a recovery and the next fault.
    pub settle: Duration,
    pub partitions: bool,
}

impl Settings {
    pub fn from_env() -> Settings {
        let seconds = std::env::var("CAPSTAN_FAULT_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(30);
        Settings {
            duration: Duration::from_secs(seconds),
            hold: Duration::from_millis(1500),
            settle: Duration::from_millis(1000),
            partitions: std::env::var("CAPSTAN_FAULT_PARTITIONS").as_deref() != Ok("0"),
        }
    }
}

/// Where faults go: the store cluster, its partition controls, and the
/// pids of API servers in front of it (if any).
pub struct Targets<'a> {
    pub cluster: &'a mut Cluster,
    /// None: no partitions (see [`Settings`]).
    pub network: Option<&'a Network>,
    pub api_servers: &'a mut [ApiProcess],
    /// The client URLs the traffic uses, rewritten when a member is
    /// replaced (None: nobody follows the change).
    pub endpoints: Option<&'a Mutex<Vec<String>>>,
}

/// Injects faults from `kinds` in turn until `settings.duration` has
/// passed; returns what was done. Panics if the cluster does not recover
/// from one within the deadline.
pub fn run(
    targets: Targets,
    clock: &Recorder,
    kinds: &[FaultKind],
    settings: &Settings,
) -> Vec<FaultRecord> {
    let Targets {
        cluster,
        network,
        api_servers,
        endpoints,
    } = targets;
    let kinds: Vec<FaultKind> = kinds
        .iter()
        .copied()
        .filter(|kind| network.is_some() || !kind.needs_network())
        .filter(|kind| !api_servers.is_empty() || !kind.needs_api_servers())
        .collect();
    let end = Instant::now() + settings.duration;
    let mut records = Vec::new();
    for kind in kinds.iter().cycle() {
        if Instant::now() >= end {
            break;
        }
        thread::sleep(settings.settle);
        let leader = cluster.wait_for_leader(RECOVERY);
        let member = match kind {
            // Whole-cluster and API server faults name no member.
            kind if *kind == FaultKind::KillAll || kind.needs_api_servers() => None,
            kind if kind.hits_leader() => Some(leader),
            _ => Some((leader + 1) % cluster.members.len()),
        };
        let injected = clock.now();
        match (kind, network) {
            (FaultKind::KillApiServer, _) => {
                let count = api_servers.len();
                let api = &mut api_servers[records.len() % count];
                api.kill9();
                thread::sleep(settings.hold);
                api.spawn();
            }
            (FaultKind::CutApiServerFromLeader, Some(network)) => {
                let pid = api_servers[records.len() % api_servers.len()].pid();
                let port = cluster.members[leader].client_port;
                cut_api_server(network, pid, port, settings.hold);
            }
            (FaultKind::ReplaceFollower, _) => {
                let index = member.expect("a follower");
                let name = format!("r{}", records.len());
                membership::replace_member(cluster, index, &name).expect("replace a member");
                let joined = &cluster.members[index];
                if let Some(network) = network {
                    network.replace(index, joined.peer_port, joined.data_dir.clone());
                }
                if let Some(endpoints) = endpoints {
                    *endpoints.lock().unwrap_or_else(|e| e.into_inner()) = cluster.urls();
                }
            }
            _ => inject(cluster, network, *kind, member, settings.hold),
        }
        let healed = clock.now();
        cluster.wait_for_leader(RECOVERY);
        wait_for(
            RECOVERY,
            &format!("a write acknowledged after {kind:?}"),
            || (clock.latest_acknowledged_write() > injected).then_some(()),
        );
        eprintln!("fault {}: {kind:?} on {member:?}", records.len());
        records.push(FaultRecord {
            kind: *kind,
            member,
            injected,
            healed,
        });
    }
    records
}

fn cut_api_server(network: &Network, pid: u32, port: u16, hold: Duration) {
    let reset = network
        .cut_process(pid, &[port])
        .expect("cut an API server off");
    eprintln!("API server {pid} cut off from the leader: {reset} connections reset");
    thread::sleep(hold);
    network.heal().expect("heal the cut");
}

fn inject(
    cluster: &mut Cluster,
    network: Option<&Network>,
    kind: FaultKind,
    member: Option<usize>,
    hold: Duration,
) {
    let members = match member {
        Some(index) => vec![index],
        None => (0..cluster.members.len()).collect(),
    };
    match kind {
        FaultKind::KillLeader | FaultKind::KillFollower | FaultKind::KillAll => {
            members.iter().for_each(|&m| cluster.members[m].kill9());
            hold_fault(cluster, kind, member, hold);
            members.iter().for_each(|&m| cluster.members[m].start());
        }
        FaultKind::PauseLeader | FaultKind::PauseFollower => {
            members
                .iter()
                .for_each(|&m| cluster.members[m].signal("STOP"));
            hold_fault(cluster, kind, member, hold);
            members
                .iter()
                .for_each(|&m| cluster.members[m].signal("CONT"));
        }
        FaultKind::IsolateLeader | FaultKind::IsolateFollower | FaultKind::DeafenLeader => {
            let network = network.expect("partitions need the partition controls");
            for &m in &members {
                let cut = match kind {
                    FaultKind::DeafenLeader => network.deafen(m),
                    _ => network.isolate(m),
                };
                if let Err(err) = cut {
                    // A member that is not running cannot be cut off: show why it stopped.
                    let logs: Vec<String> =
                        cluster.members.iter().map(|m| tail(&m.log(), 40)).collect();
                    panic!(
                        "partition a member: {err}\nmember logs:\n{}",
                        logs.join("\n-----\n")
                    );
                }
            }
            hold_fault(cluster, kind, member, hold);
            network.heal().expect("heal the partition");
        }
        FaultKind::SlowDiskLeader | FaultKind::SlowDiskFollower => {
            let slow = |millis| {
                for &m in &members {
                    cluster.members[m]
                        .set_sync_delay(millis)
                        .unwrap_or_else(|err| panic!("slow disk: {err}"));
                }
            };
            slow(SLOW_DISK_MS);
            hold_fault(cluster, kind, member, hold);
            slow(0);
        }
        FaultKind::CutApiServerFromLeader
        | FaultKind::KillApiServer
        | FaultKind::ReplaceFollower => {
            unreachable!("{kind:?} is run by the schedule")
        }
    }
}

/// Keeps a fault in place for `hold`; a fault that took one member's
/// leadership away is kept until the others have elected a new leader,
/// which proves the fault really cut the member off.
fn hold_fault(cluster: &Cluster, kind: FaultKind, member: Option<usize>, hold: Duration) {
    thread::sleep(hold);
    if let (true, Some(old)) = (kind.hits_leader(), member) {
        let what = format!("a new leader while {kind:?} on member {old} holds");
        wait_for(RECOVERY, &what, || {
            let mut others = (0..cluster.members.len()).filter(|&m| m != old);
            others.any(|m| cluster.members[m].is_leader()).then_some(())
        });
    }
}

/// For each fault that took the leader away: the time from injection to
/// the first acknowledged write that was sent after it.
pub fn failover_times(records: &[FaultRecord], ops: &[Operation]) -> Vec<Duration> {
    let mut acked: Vec<(u64, u64)> = ops
        .iter()
        .filter(|op| op.is_acknowledged_write())
        .filter_map(|op| Some((op.call, op.ret?)))
        .collect();
    acked.sort();
    records
        .iter()
        .filter(|r| r.kind.hits_leader())
        .filter_map(|r| {
            let start = acked.partition_point(|(call, _)| *call < r.injected);
            let first = acked[start..].iter().map(|(_, ret)| *ret).min()?;
            Some(Duration::from_nanos(first - r.injected))
        })
        .collect()
}

/// Where a run keeps its history and report: `CAPSTAN_FAULT_DIR`, else
/// the system's temporary folder; `name` plus this process's id.
pub fn output_path(name: &str) -> PathBuf {
    let dir = std::env::var_os("CAPSTAN_FAULT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let _ = std::fs::create_dir_all(&dir);
    dir.join(format!("capstan-fault-{name}-{}", std::process::id()))
}

/// What a run did and found.
pub struct Report {
    pub name: String,
    pub operations: usize,
    pub acknowledged: usize,
    pub ambiguous: usize,
    pub faults: Vec<FaultRecord>,
    pub failovers: Vec<Duration>,
    pub violations: Vec<String>,
    pub history: PathBuf,
    /// Lines specific to the profile (watch events seen, leases...).
    pub notes: Vec<String>,
}

impl Report {
    /// Writes the run's history under `CAPSTAN_FAULT_DIR` (as `file`) and
    /// starts the report that points at it.
    pub fn for_history(
        file: &str,
        name: &str,
        ops: &[Operation],
        faults: Vec<FaultRecord>,
    ) -> Report {
        let path = output_path(file).with_extension("history");
        history::write_to(&path, ops).expect("write the history");
        Report::new(name, ops, faults, path)
    }

    /// Takes in what the checker found.
    pub fn absorb(&mut self, findings: Findings) {
        self.violations.extend(findings.violations);
        self.notes.extend(findings.notes);
    }

    /// Says so when the run had no partition controls.
    pub fn note_partitions(&mut self, network: Option<&Network>) {
        if network.is_none() {
            self.notes
                .push("partitions: left out (CAPSTAN_FAULT_PARTITIONS=0)".into());
        }
    }

    /// Prints the report and keeps a copy next to the history.
    pub fn publish(&self) {
        eprintln!("{self}");
        let _ = std::fs::write(self.history.with_extension("report"), format!("{self}\n"));
    }

    pub fn new(
        name: &str,
        ops: &[Operation],
        faults: Vec<FaultRecord>,
        history: PathBuf,
    ) -> Report {
        Report {
            name: name.to_string(),
            operations: ops.len(),
            acknowledged: ops.iter().filter(|op| !op.is_ambiguous()).count(),
            ambiguous: ops.iter().filter(|op| op.is_ambiguous()).count(),
            failovers: failover_times(&faults, ops),
            faults,
            violations: Vec::new(),
            history,
            notes: Vec::new(),
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "== fault report: {} ==", self.name)?;
        writeln!(
            f,
            "operations: {} ({} answered, {} ambiguous)",
            self.operations, self.acknowledged, self.ambiguous
        )?;
        let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
        for record in &self.faults {
            *by_kind.entry(format!("{:?}", record.kind)).or_default() += 1;
        }
        writeln!(f, "faults: {} {by_kind:?}", self.faults.len())?;
        let mut sorted = self.failovers.clone();
        sorted.sort();
        match (sorted.get(sorted.len() / 2), sorted.last()) {
            (Some(median), Some(max)) => writeln!(
                f,
                "failover (fault on the leader to first acknowledged write): median {median:?}, max {max:?}, over {}",
                sorted.len()
            )?,
            _ => writeln!(f, "failover: no leader fault measured")?,
        }
        for note in &self.notes {
            writeln!(f, "{note}")?;
        }
        writeln!(f, "violations: {}", self.violations.len())?;
        for violation in &self.violations {
            writeln!(f, "  {violation}")?;
        }
        write!(f, "history: {}", self.history.display())
    }
}

/// The last `lines` lines of a log.
fn tail(log: &str, lines: usize) -> String {
    let all: Vec<&str> = log.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
