//! A `capstan-nodes` process for the tests that need simulated nodes
//! apart from `capstan`'s own (against `capstan-apiserver`, or with
//! settings of their own), killed when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::kubectl::Kubectl;
use crate::{binary, free_port, watchdog};

pub struct SimNodes {
    child: Child,
    pub log: PathBuf,
    _watchdog: watchdog::Watchdog,
}

impl SimNodes {
    /// `capstan-nodes` with `args` against the API server `kubectl`
    /// reaches (as its admin), logging into `dir`; no metrics API (the
    /// tests that need one start it themselves).
    pub fn start(dir: &Path, kubectl: &Kubectl, args: &[&str]) -> SimNodes {
        let admin_port = free_port();
        let log = dir.join(format!("sim-nodes-{admin_port}.log"));
        let file = std::fs::File::create(&log).expect("create the nodes log");
        let child = Command::new(binary("capstan-nodes"))
            .arg("--kubeconfig")
            .arg(&kubectl.kubeconfig)
            .args([
                "--kubelet-port",
                "0",
                "--healthz-port",
                &admin_port.to_string(),
            ])
            .args(["--register-metrics-api", "false"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start capstan-nodes");
        watchdog::track(child.id());
        SimNodes {
            child,
            log,
            _watchdog: watchdog::arm(),
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for SimNodes {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        watchdog::untrack(self.child.id());
    }
}
