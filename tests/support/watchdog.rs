//! A time budget per test. Every server a test starts arms the watchdog
//! for that test (named by its thread, as the test harness names it);
//! helpers that wait say what they wait for. A test still running past its
//! budget ends the test process with a message naming the test and its
//! last wait, after killing the servers the process started, so a hang
//! becomes a clear failure instead of a CI job stuck until its limit.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// The budget of one test, unless `CAPSTAN_TEST_BUDGET_SECS` says otherwise.
/// Generous: it guards against hangs, it does not measure speed.
const DEFAULT_BUDGET: Duration = Duration::from_secs(900);

struct Armed {
    test: String,
    deadline: Instant,
}

static ARMED: Mutex<BTreeMap<u64, Armed>> = Mutex::new(BTreeMap::new());
/// The last wait announced by each test thread.
static WAITING: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());
/// Child processes to kill if the watchdog fires.
static CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(0);

fn budget() -> Duration {
    std::env::var("CAPSTAN_TEST_BUDGET_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(DEFAULT_BUDGET, Duration::from_secs)
}

fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("an unnamed thread")
        .to_string()
}

/// Disarms its entry when dropped.
pub struct Watchdog(u64);

impl Drop for Watchdog {
    fn drop(&mut self) {
        ARMED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.0);
    }
}

/// Arms the watchdog for the current test.
pub fn arm() -> Watchdog {
    static MONITOR: Once = Once::new();
    MONITOR.call_once(|| {
        std::thread::Builder::new()
            .name("test-watchdog".into())
            .spawn(monitor)
            .expect("start the test watchdog");
    });
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let armed = Armed {
        test: test_name(),
        deadline: Instant::now() + budget(),
    };
    ARMED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id, armed);
    Watchdog(id)
}

/// Records what the current test waits for now (named if it overruns).
pub fn waiting_for(what: impl Into<String>) {
    WAITING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(test_name(), what.into());
}

/// A child process to kill should the watchdog fire.
pub fn track(pid: u32) {
    CHILDREN.lock().unwrap_or_else(|e| e.into_inner()).push(pid);
}

/// A child process that was killed and reaped.
pub fn untrack(pid: u32) {
    CHILDREN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|p| *p != pid);
}

fn monitor() {
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let overdue = ARMED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .find(|a| Instant::now() > a.deadline)
            .map(|a| a.test.clone());
        if let Some(test) = overdue {
            fire(&test);
        }
    }
}

fn fire(test: &str) -> ! {
    let waiting = WAITING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(test)
        .cloned()
        .unwrap_or_else(|| "nothing announced".into());
    eprintln!(
        "\nWATCHDOG: test `{test}` is still running after its budget of {:?}; \
         last waiting for: {waiting}. Killing its servers and failing.",
        budget()
    );
    for pid in CHILDREN.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    std::process::exit(101)
}
