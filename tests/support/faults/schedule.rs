//! A schedule of faults injected one after another into a store cluster
//! while traffic runs (the run's report is `report`).
//!
//! The kinds go round in an order rotated by a seed, so a run too short
//! for all of them does not always drop the same ones; past its time the
//! schedule goes on with the kinds that have not yet taken effect (for at
//! most as long again), and the report fails a run in which an advertised
//! kind never did. Each fault is held for a while, shown to have taken
//! effect (`proof`), healed, and the schedule then waits (with a
//! deadline) until the cluster has a leader and some write called after
//! the injection was acknowledged, so every fault is survived before the
//! next one starts. Failover times are measured afterwards from the
//! history, not asserted: speed belongs to the benchmarks.

use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use super::apiserver::ApiProcess;
use super::proof::{self, Evidence};
use super::{membership, Network};
use crate::cluster::Cluster;
use crate::history::Recorder;
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
    /// An API server cut off from the client port of a store member it
    /// is using, the leader's when it uses it (the others still reach the
    /// member, and it can still reach the other members); needs API
    /// servers.
    CutApiServerFromStore,
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
    /// Whether the fault needs the partition controls (a [`Network`]).
    pub fn needs_network(self) -> bool {
        matches!(
            self,
            FaultKind::IsolateLeader
                | FaultKind::IsolateFollower
                | FaultKind::DeafenLeader
                | FaultKind::CutApiServerFromStore
        )
    }

    /// Whether the fault is done to an API server.
    pub fn needs_api_servers(self) -> bool {
        matches!(
            self,
            FaultKind::CutApiServerFromStore | FaultKind::KillApiServer
        )
    }

    /// Whether the fault takes the leader away, so writes stop until a
    /// leader is elected (or the old one is back).
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

/// Every kind, in the order a schedule cycles through them (from a
/// place the seed picks).
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

/// One injected fault, on the history's clock (nanoseconds), and what
/// showed it took effect.
#[derive(Debug, Clone)]
pub struct FaultRecord {
    pub kind: FaultKind,
    pub member: Option<usize>,
    pub injected: u64,
    pub healed: u64,
    pub evidence: Evidence,
}

/// What a schedule did.
#[derive(Debug, Clone)]
pub struct Faults {
    pub records: Vec<FaultRecord>,
    /// The kinds it set out to inject (those its targets allow).
    pub order: Vec<FaultKind>,
    pub seed: u64,
    /// How long it ran past its time to fit every kind in.
    pub overran: Option<Duration>,
}

impl Faults {
    /// Advertised kinds no fault of which was shown to take effect.
    pub fn missing(&self) -> Vec<FaultKind> {
        let shown = |kind: &FaultKind| {
            self.records
                .iter()
                .any(|r| r.kind == *kind && r.evidence.is_ok())
        };
        self.order.iter().copied().filter(|k| !shown(k)).collect()
    }
}

/// How long and how hard: from `CAPSTAN_FAULT_SECONDS` (default 30);
/// `CAPSTAN_FAULT_PARTITIONS=0` leaves partitions out, for a machine
/// where the test cannot use iptables and cgroups (not root);
/// `CAPSTAN_FAULT_SEED` repeats a run's order (default: from the clock).
#[derive(Debug, Clone)]
pub struct Settings {
    pub duration: Duration,
    /// How long each fault lasts.
    pub hold: Duration,
    /// Quiet time between a recovery and the next fault.
    pub settle: Duration,
    pub partitions: bool,
    pub seed: u64,
}

impl Settings {
    pub fn from_env() -> Settings {
        let seconds = std::env::var("CAPSTAN_FAULT_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(30);
        let clock = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Settings {
            duration: Duration::from_secs(seconds),
            hold: Duration::from_millis(1500),
            settle: Duration::from_millis(1000),
            partitions: std::env::var("CAPSTAN_FAULT_PARTITIONS").as_deref() != Ok("0"),
            seed: std::env::var("CAPSTAN_FAULT_SEED")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(clock),
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

/// Injects faults from `kinds` (those `targets` allow), in an order
/// rotated by the seed, until `settings.duration` has passed and each
/// has taken effect once, or twice that time has; returns what was done.
/// Panics if the cluster does not recover from one within the deadline.
pub fn run(
    mut targets: Targets,
    clock: &Recorder,
    kinds: &[FaultKind],
    settings: &Settings,
) -> Faults {
    let mut order: Vec<FaultKind> = kinds
        .iter()
        .copied()
        .filter(|kind| targets.network.is_some() || !kind.needs_network())
        .filter(|kind| !targets.api_servers.is_empty() || !kind.needs_api_servers())
        .collect();
    let turn = settings.seed % order.len().max(1) as u64;
    order.rotate_left(turn as usize);
    let mut faults = Faults {
        records: Vec::new(),
        order,
        seed: settings.seed,
        overran: None,
    };
    assert!(!faults.order.is_empty(), "no fault kind fits these targets");
    let end = Instant::now() + settings.duration;
    let last_call = end + settings.duration;
    let mut extended = false;
    for turn in 0.. {
        let now = Instant::now();
        let kind = match (now < end, faults.missing().first()) {
            (true, _) => faults.order[turn % faults.order.len()],
            (false, Some(&kind)) if now < last_call => {
                extended = true;
                kind
            }
            _ => break,
        };
        let record = one_fault(&mut targets, clock, kind, faults.records.len(), settings);
        faults.records.push(record);
    }
    faults.overran = extended.then(|| Instant::now().saturating_duration_since(end));
    faults
}

/// Injects one fault, holds it (gathering the evidence that it took
/// effect), heals it and waits until writes flow again.
fn one_fault(
    targets: &mut Targets,
    clock: &Recorder,
    kind: FaultKind,
    number: usize,
    settings: &Settings,
) -> FaultRecord {
    thread::sleep(settings.settle);
    let cluster = &mut *targets.cluster;
    let leader = cluster.wait_for_leader(RECOVERY);
    let member = match kind {
        // Whole-cluster and API server faults name no member.
        kind if kind == FaultKind::KillAll || kind.needs_api_servers() => None,
        kind if kind.hits_leader() => Some(leader),
        _ => Some((leader + 1) % cluster.members.len()),
    };
    let injected = clock.now();
    let hold = settings.hold;
    let evidence = match (kind, targets.network) {
        (FaultKind::KillApiServer, _) => {
            let count = targets.api_servers.len();
            kill_api_server(&mut targets.api_servers[number % count], hold)
        }
        (FaultKind::CutApiServerFromStore, Some(network)) => {
            let pid = targets.api_servers[number % targets.api_servers.len()].pid();
            let ports: Vec<u16> = cluster.members.iter().map(|m| m.client_port).collect();
            let used = super::ports_in_use(pid, &ports);
            let leader_port = ports[leader];
            let port = match used.first() {
                Some(&other) if !used.contains(&leader_port) => other,
                _ => leader_port,
            };
            cut_api_server(network, pid, port, hold)
        }
        (FaultKind::ReplaceFollower, network) => {
            let index = member.expect("a follower");
            replace_follower(cluster, network, targets.endpoints, index, number)
        }
        (kind, network) => inject(cluster, network, kind, member, hold),
    };
    let healed = clock.now();
    cluster.wait_for_leader(RECOVERY);
    wait_for(
        RECOVERY,
        &format!("a write acknowledged after {kind:?}"),
        || (clock.latest_acknowledged_write() > injected).then_some(()),
    );
    eprintln!("fault {number}: {kind:?} on {member:?}: {evidence:?}");
    FaultRecord {
        kind,
        member,
        injected,
        healed,
        evidence,
    }
}

fn kill_api_server(api: &mut ApiProcess, hold: Duration) -> Evidence {
    api.kill9();
    thread::sleep(hold);
    let evidence = match proof::refuses(api.port) {
        true => Ok(format!("API server port {} refused connections", api.port)),
        false => Err(format!("API server port {} still accepted", api.port)),
    };
    api.spawn();
    evidence
}

fn cut_api_server(network: &Network, pid: u32, port: u16, hold: Duration) -> Evidence {
    let reset = network
        .cut_process(pid, &[port])
        .expect("cut an API server off");
    thread::sleep(hold);
    let dropped = network.dropped_packets();
    network.heal().expect("heal the cut");
    match (reset, dropped) {
        (0, 0) => Err(format!("API server {pid} did not use port {port}")),
        _ => Ok(format!(
            "API server {pid}: {reset} connections to port {port} reset, {dropped} packets dropped"
        )),
    }
}

fn replace_follower(
    cluster: &mut Cluster,
    network: Option<&Network>,
    endpoints: Option<&Mutex<Vec<String>>>,
    index: usize,
    number: usize,
) -> Evidence {
    let name = format!("r{number}");
    membership::replace_member(cluster, index, &name).expect("replace a member");
    let joined = &cluster.members[index];
    if let Some(network) = network {
        network.replace(index, joined.peer_port, joined.data_dir.clone());
    }
    if let Some(endpoints) = endpoints {
        *endpoints.lock().unwrap_or_else(|e| e.into_inner()) = cluster.urls();
    }
    proof::caught_up(cluster, index, RECOVERY)
}

/// The first evidence, then the second (both must show).
fn and_then(first: Evidence, second: impl FnOnce() -> Evidence) -> Evidence {
    let first = first?;
    let second = second()?;
    Ok(match second.is_empty() {
        true => first,
        false => format!("{first}; {second}"),
    })
}

fn inject(
    cluster: &mut Cluster,
    network: Option<&Network>,
    kind: FaultKind,
    member: Option<usize>,
    hold: Duration,
) -> Evidence {
    let members = match member {
        Some(index) => vec![index],
        None => (0..cluster.members.len()).collect(),
    };
    // A fault on the leader has taken effect once the others elect one.
    let leader_lost = |cluster: &Cluster| match (kind.hits_leader(), member) {
        (true, Some(old)) => proof::new_leader(cluster, old, RECOVERY),
        _ => Ok(String::new()),
    };
    match kind {
        FaultKind::KillLeader | FaultKind::KillFollower | FaultKind::KillAll => {
            members.iter().for_each(|&m| cluster.members[m].kill9());
            let evidence = and_then(proof::killed(cluster, &members, hold), || {
                leader_lost(cluster)
            });
            members.iter().for_each(|&m| cluster.members[m].start());
            evidence
        }
        FaultKind::PauseLeader | FaultKind::PauseFollower => {
            let signal = |name| {
                members
                    .iter()
                    .for_each(|&m| cluster.members[m].signal(name))
            };
            signal("STOP");
            let evidence = and_then(proof::paused(cluster, &members, hold), || {
                leader_lost(cluster)
            });
            signal("CONT");
            evidence
        }
        FaultKind::IsolateLeader | FaultKind::IsolateFollower | FaultKind::DeafenLeader => {
            let network = network.expect("partitions need the partition controls");
            partition(cluster, network, kind, &members);
            let evidence = match kind {
                FaultKind::IsolateFollower => proof::stalled(cluster, members[0], hold),
                _ => {
                    thread::sleep(hold);
                    leader_lost(cluster)
                }
            };
            network.heal().expect("heal the partition");
            evidence
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
            let evidence = proof::syncs_held(cluster, &members, hold);
            slow(0);
            evidence
        }
        FaultKind::CutApiServerFromStore
        | FaultKind::KillApiServer
        | FaultKind::ReplaceFollower => {
            unreachable!("{kind:?} is run by the schedule")
        }
    }
}

/// Cuts `members` off (or, for [`FaultKind::DeafenLeader`], makes them
/// deaf); a member that is not running cannot be: the logs say why.
fn partition(cluster: &Cluster, network: &Network, kind: FaultKind, members: &[usize]) {
    for &m in members {
        let cut = match kind {
            FaultKind::DeafenLeader => network.deafen(m),
            _ => network.isolate(m),
        };
        if let Err(err) = cut {
            let logs: Vec<String> = cluster.members.iter().map(|m| tail(&m.log(), 40)).collect();
            panic!(
                "partition a member: {err}\nmember logs:\n{}",
                logs.join("\n-----\n")
            );
        }
    }
}

/// The last `lines` lines of a log.
fn tail(log: &str, lines: usize) -> String {
    let all: Vec<&str> = log.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
