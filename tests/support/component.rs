//! A component binary (`capstan-scheduler`, `capstan-controller-manager`,
//! `capstan-nodes`) run apart as a client of an API server, as its admin,
//! for the tests that need one with settings of their own; killed when
//! dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::kubectl::Kubectl;
use crate::{binary, watchdog};

pub struct Component {
    child: Child,
    pub log: PathBuf,
    _watchdog: watchdog::Watchdog,
}

impl Component {
    /// `name` with `--kubeconfig` of the API server `kubectl` reaches and
    /// `args`, its stderr logged into a file of its own in `dir`.
    pub fn start(dir: &Path, kubectl: &Kubectl, name: &str, args: &[&str]) -> Component {
        // Several of one component may log into one folder.
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let log = dir.join(format!("{name}-{n}.log"));
        let file = std::fs::File::create(&log).expect("create a component's log");
        let child = Command::new(binary(name))
            .arg("--kubeconfig")
            .arg(&kubectl.kubeconfig)
            .args(args)
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        watchdog::track(child.id());
        Component {
            child,
            log,
            _watchdog: watchdog::arm(),
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The log's last `lines` lines, for a failure's message.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = self.log_text();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills it (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        watchdog::untrack(self.child.id());
    }
}

impl Drop for Component {
    fn drop(&mut self) {
        self.kill();
    }
}
