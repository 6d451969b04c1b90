//! What a server's processes spend, from `/proc`: CPU time of the whole
//! process and of each of its threads, and context switches; and starting
//! a process pinned to a set of cores (`--cores`).
//!
//! A busy thread next to an idle machine is the sign of a serial ceiling:
//! more clients or more cores cannot help a server whose one thread is
//! already at a full core. So each run reports the busiest thread of each
//! server beside the process's total.

use std::collections::HashMap;
use std::time::Duration;

use serde::Serialize;

/// One thread's counters at one moment.
#[derive(Debug, Clone)]
struct ThreadSample {
    name: String,
    cpu_s: f64,
    switches: u64,
}

/// A process's threads at one moment, by thread id.
#[derive(Debug, Clone, Default)]
pub struct ProcessSample {
    threads: HashMap<u32, ThreadSample>,
    /// The process's own total (exited threads included).
    cpu_s: f64,
}

/// Reads every thread of process `pid`; None once the process is gone.
pub fn sample(pid: u32) -> Option<ProcessSample> {
    let cpu_s = stat_cpu_seconds(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
    let mut threads = HashMap::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        // A thread may end between the listing and the read: skip it.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let (Some(name), Some(cpu_s)) = (stat_name(&stat), stat_cpu_seconds(&stat)) else {
            continue;
        };
        let switches = status_switches(&status);
        threads.insert(
            tid,
            ThreadSample {
                name,
                cpu_s,
                switches,
            },
        );
    }
    Some(ProcessSample { threads, cpu_s })
}

/// What one process spent between two samples.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessUse {
    /// CPU of the whole process, in cores (1.0 = one core all the time).
    pub process_cores: f64,
    /// The thread that used the most CPU: its name and cores.
    pub busiest_thread: String,
    pub busiest_thread_cores: f64,
    /// Voluntary and involuntary context switches of all its threads.
    pub context_switches: u64,
    /// The busiest threads, most first: name and cores.
    pub top_threads: Vec<(String, f64)>,
}

/// Threads listed per process in the JSON report.
const TOP_THREADS: usize = 6;

/// The difference of two samples of one process over `elapsed`.
pub fn between(before: &ProcessSample, after: &ProcessSample, elapsed: Duration) -> ProcessUse {
    let seconds = elapsed.as_secs_f64().max(1e-9);
    let mut threads = Vec::with_capacity(after.threads.len());
    let mut context_switches = 0;
    for (tid, now) in &after.threads {
        // A thread started during the run counts from zero.
        let (cpu_then, switches_then) = before
            .threads
            .get(tid)
            .map_or((0.0, 0), |then| (then.cpu_s, then.switches));
        threads.push((now.name.clone(), (now.cpu_s - cpu_then).max(0.0) / seconds));
        context_switches += now.switches.saturating_sub(switches_then);
    }
    threads.sort_by(|a, b| b.1.total_cmp(&a.1));
    threads.truncate(TOP_THREADS);
    let busiest = threads
        .first()
        .cloned()
        .unwrap_or_else(|| ("-".into(), 0.0));
    ProcessUse {
        process_cores: (after.cpu_s - before.cpu_s).max(0.0) / seconds,
        busiest_thread: busiest.0,
        busiest_thread_cores: busiest.1,
        context_switches,
        top_threads: threads,
    }
}

/// CPU seconds the threads `pick` chooses by name spent between two
/// samples (a thread started in between counts from zero; one that ended
/// is missed).
pub fn threads_cpu_seconds(
    before: &ProcessSample,
    after: &ProcessSample,
    pick: impl Fn(&str) -> bool,
) -> f64 {
    let spent = after.threads.iter().filter(|(_, now)| pick(&now.name));
    spent
        .map(|(tid, now)| {
            let then = before.threads.get(tid).map_or(0.0, |then| then.cpu_s);
            (now.cpu_s - then).max(0.0)
        })
        .sum()
}

/// What a whole server (one process per member) spent during a run.
#[derive(Debug, Clone, Serialize)]
pub struct ServerUse {
    /// CPU seconds of all its processes.
    pub cpu_s: f64,
    /// Context switches of all its processes' threads.
    pub context_switches: u64,
    /// The process whose busiest thread was the busiest of all.
    pub busiest: ProcessUse,
}

/// The difference of two samples of every process of a server.
pub fn server_between(
    before: &[ProcessSample],
    after: &[ProcessSample],
    elapsed: Duration,
) -> Option<ServerUse> {
    let used: Vec<ProcessUse> = (before.iter().zip(after))
        .map(|(before, after)| between(before, after, elapsed))
        .collect();
    let cpu_s = used.iter().map(|u| u.process_cores).sum::<f64>() * elapsed.as_secs_f64();
    let context_switches = used.iter().map(|u| u.context_switches).sum();
    let busiest = used
        .into_iter()
        .max_by(|a, b| a.busiest_thread_cores.total_cmp(&b.busiest_thread_cores))?;
    Some(ServerUse {
        cpu_s,
        context_switches,
        busiest,
    })
}

/// User plus system CPU time of process `pid` so far, in seconds.
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    stat_cpu_seconds(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

fn stat_cpu_seconds(stat: &str) -> Option<f64> {
    let ticks = cpu_ticks(stat)?;
    // SAFETY: sysconf only reads a system constant.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (per_second > 0).then(|| ticks as f64 / per_second as f64)
}

/// utime + stime (fields 14 and 15) of a `/proc/PID/stat` line. The command
/// name (field 2) may hold spaces, so fields are counted after its `)`.
fn cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The thread's name: field 2 of its stat line, between the parentheses.
fn stat_name(stat: &str) -> Option<String> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    Some(stat.get(open + 1..close)?.to_string())
}

fn status_switches(status: &str) -> u64 {
    status
        .lines()
        .filter(|line| line.contains("ctxt_switches:"))
        .filter_map(|line| line.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

/// The cores this process may run on, lowest first.
pub fn allowed_cores() -> Result<Vec<usize>, String> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set, and the kernel
    // writes at most its size into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(format!(
                "sched_getaffinity: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .collect())
    }
}

/// Starts the command's process on `cores` only; its threads inherit
/// the set.
pub fn pin_at_start(command: &mut std::process::Command, cores: &[usize]) {
    use std::os::unix::process::CommandExt;
    // SAFETY: as in `allowed_cores`; CPU_SET only writes inside the set.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cores {
            libc::CPU_SET(cpu, &mut set);
        }
        set
    };
    // SAFETY: sched_setaffinity is a plain system call, safe between fork
    // and exec, and the set is copied into the closure.
    unsafe {
        command.pre_exec(move || {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_skip_a_spaced_command_name() {
        let stat = "42 (a b) S 1 42 42 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 1 0";
        assert_eq!(cpu_ticks(stat), Some(281));
        assert_eq!(stat_name(stat).as_deref(), Some("a b"));
        assert_eq!(cpu_ticks("42 (x) S 1"), None);
        assert!(process_cpu_seconds(std::process::id()).is_some());
    }

    #[test]
    fn a_spinning_threads_time_is_counted() {
        let pid = std::process::id();
        let before = sample(pid).expect("this process");
        let spin = std::thread::Builder::new()
            .name("bench-spinner".into())
            .spawn(|| {
                let started = std::time::Instant::now();
                let mut x = 0u64;
                while started.elapsed() < Duration::from_millis(300) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
                x
            })
            .unwrap();
        // Sampled while the spinner still runs: a finished thread leaves
        // /proc/PID/task.
        std::thread::sleep(Duration::from_millis(250));
        let after = sample(pid).expect("this process");
        spin.join().unwrap();
        let spinner = (after.threads.values())
            .find(|t| t.name == "bench-spinner")
            .expect("the spinner is listed by name");
        // Other tests' threads may run too, so the spinner need not be
        // the busiest; but the busiest used at least what it did.
        let spinner_cores = spinner.cpu_s / 0.25;
        let used = between(&before, &after, Duration::from_millis(250));
        assert!(spinner.cpu_s > 0.0, "a spinning thread used no CPU");
        assert!(used.busiest_thread_cores >= spinner_cores - 1e-9);
        assert!(used.process_cores > 0.0);
    }

    #[test]
    fn switches_add_both_kinds() {
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t7\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(status_switches(status), 10);
    }

    #[test]
    fn this_process_may_run_somewhere() {
        assert!(!allowed_cores().unwrap().is_empty());
    }
}
