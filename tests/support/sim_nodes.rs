//! A `capstan-nodes` process for the tests that need simulated nodes
//! apart from `capstan`'s own (against `capstan-apiserver`, or with
//! settings of their own), killed when dropped, with its admin routes
//! (`/nodes`, `/nodes/<name>/stop`, `/nodes/<name>/start`).

use std::path::Path;
use std::process::Command;

use crate::component::Component;
use crate::free_port;
use crate::kubectl::Kubectl;

pub struct SimNodes {
    pub process: Component,
    pub admin_port: u16,
}

impl SimNodes {
    /// `capstan-nodes` with `args` against the API server `kubectl`
    /// reaches (as its admin), logging into `dir`; no metrics API (the
    /// tests that need one start it themselves).
    pub fn start(dir: &Path, kubectl: &Kubectl, args: &[&str]) -> SimNodes {
        let args = [&["--register-metrics-api", "false"], args].concat();
        SimNodes::start_serving_metrics(dir, kubectl, &args)
    }

    /// As [`SimNodes::start`], registering the nodes' metrics API
    /// (metrics.k8s.io through the aggregator) unless `args` say otherwise.
    pub fn start_serving_metrics(dir: &Path, kubectl: &Kubectl, args: &[&str]) -> SimNodes {
        let admin_port = free_port();
        let port = admin_port.to_string();
        let base = ["--kubelet-port", "0", "--healthz-port", &port];
        let args = [&base[..], args].concat();
        SimNodes {
            process: Component::start(dir, kubectl, "capstan-nodes", &args),
            admin_port,
        }
    }

    pub fn log_text(&self) -> String {
        self.process.log_text()
    }

    /// Kills the process (SIGKILL); its nodes stay in the API.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// `method` on the admin route `path`; the body of a success.
    pub fn admin(&self, method: &str, path: &str) -> String {
        let url = format!("http://127.0.0.1:{}{path}", self.admin_port);
        let output = Command::new("curl")
            .args(["-sS", "-X", method, &url])
            .output()
            .expect("run curl");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).to_string()
    }
}
