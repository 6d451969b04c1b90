//! What shows that a fault took effect, gathered while it holds. A fault
//! only counts once something outside the schedule's own say-so shows it:
//! a killed member's port refuses connections, a paused one is stopped in
//! the kernel's eyes, an isolated follower's applied index stands still
//! while the leader's moves on, a slow disk holds raft log syncs, the
//! others elect a new leader when the leader is taken away, a new member
//! catches up. A fault whose effect cannot be shown is reported and not
//! counted, so a run where an advertised kind never took effect fails.

use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use crate::cluster::{Cluster, Member};

/// Some(what showed the fault took effect), or Err(why nothing did).
pub type Evidence = Result<String, String>;

/// How often a proof samples while a fault holds.
const SAMPLE: Duration = Duration::from_millis(50);

/// Whether nothing listens on `port` any more.
pub fn refuses(port: u16) -> bool {
    matches!(
        TcpStream::connect(("127.0.0.1", port)),
        Err(err) if err.kind() == std::io::ErrorKind::ConnectionRefused
    )
}

/// Holds a kill of `members` for `hold`, then shows their ports refuse.
pub fn killed(cluster: &Cluster, members: &[usize], hold: Duration) -> Evidence {
    thread::sleep(hold);
    let ports: Vec<u16> = members
        .iter()
        .map(|&m| cluster.members[m].client_port)
        .collect();
    match ports.iter().find(|&&port| !refuses(port)) {
        None => Ok(format!("ports {ports:?} refused connections")),
        Some(port) => Err(format!("port {port} still accepted connections")),
    }
}

/// Holds a SIGSTOP of `members` for `hold`, then shows the kernel has
/// them stopped.
pub fn paused(cluster: &Cluster, members: &[usize], hold: Duration) -> Evidence {
    thread::sleep(hold);
    let mut states = Vec::new();
    for &m in members {
        let member = &cluster.members[m];
        let pid = member
            .pid()
            .ok_or(format!("{} is not running", member.name))?;
        match process_state(pid) {
            Some('T') => states.push(format!("{} (pid {pid}) stopped", member.name)),
            state => return Err(format!("{} (pid {pid}) in state {state:?}", member.name)),
        }
    }
    Ok(states.join(", "))
}

/// The state letter of `/proc/<pid>/stat` (R, S, D, T, Z...).
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may hold spaces: read after it.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Shows that members other than `old` elected a leader while the fault
/// on `old` holds (waiting up to `limit`): it really lost the leadership.
pub fn new_leader(cluster: &Cluster, old: usize, limit: Duration) -> Evidence {
    let started = Instant::now();
    while started.elapsed() < limit {
        let others = (0..cluster.members.len()).filter(|&m| m != old);
        if let Some(leader) = others.into_iter().find(|&m| cluster.members[m].is_leader()) {
            let name = &cluster.members[leader].name;
            return Ok(format!("{name} led {:?} after", started.elapsed()));
        }
        thread::sleep(SAMPLE);
    }
    Err(format!("no other member led within {limit:?}"))
}

/// Holds an isolation of follower `index` for `hold`, then shows its
/// applied index stood still over the last two thirds of the hold while
/// the leader's moved past it.
pub fn stalled(cluster: &Cluster, index: usize, hold: Duration) -> Evidence {
    // Messages already on their way when the cut came may still land.
    thread::sleep(hold / 3);
    let follower = &cluster.members[index];
    let before = applied(follower)?;
    thread::sleep(hold - hold / 3);
    let after = applied(follower)?;
    let leader = cluster
        .leader()
        .filter(|&l| l != index)
        .ok_or("no other member led")?;
    let leading = applied(&cluster.members[leader])?;
    if before == after && leading > after {
        Ok(format!(
            "{}'s applied index stayed at {after} while the leader's reached {leading}",
            follower.name
        ))
    } else {
        Err(format!(
            "{}'s applied index went {before} -> {after}, the leader's is {leading}",
            follower.name
        ))
    }
}

fn applied(member: &Member) -> Result<i64, String> {
    member
        .gauge("raft_applied_index")
        .ok_or(format!("{} did not report its applied index", member.name))
}

/// Holds a slow disk on `members` for `hold`, sampling the failpoint:
/// shows raft log syncs were held by it.
pub fn syncs_held(cluster: &Cluster, members: &[usize], hold: Duration) -> Evidence {
    let started = Instant::now();
    let mut most = 0;
    while started.elapsed() < hold {
        for &m in members {
            most = most.max(cluster.members[m].syncs_waiting().unwrap_or(0));
        }
        thread::sleep(SAMPLE);
    }
    match most {
        0 => Err("no raft log sync was ever held".into()),
        n => Ok(format!("up to {n} raft log syncs held at once")),
    }
}

/// Shows the member that joined in slot `index` caught up: its applied
/// index reached the leader's as it was when it joined (within `limit`).
pub fn caught_up(cluster: &Cluster, index: usize, limit: Duration) -> Evidence {
    let leader = cluster.leader().ok_or("no leader")?;
    let target = applied(&cluster.members[leader])?;
    let joined = &cluster.members[index];
    let started = Instant::now();
    while started.elapsed() < limit {
        if applied(joined).is_ok_and(|at| at >= target) {
            return Ok(format!(
                "{} applied index {target} (the leader's at its joining) {:?} after",
                joined.name,
                started.elapsed()
            ));
        }
        thread::sleep(SAMPLE);
    }
    Err(format!(
        "{} did not reach applied index {target} within {limit:?}",
        joined.name
    ))
}
