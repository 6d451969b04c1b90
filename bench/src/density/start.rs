//! Starting the control plane in the shape asked for: one `capstan`
//! here, `make cluster`'s shape in `cluster.rs`.

use std::path::Path;
use std::process::Command;

use tempfile::TempDir;

use super::control_plane::{controller_rates, ControlPlane, Shape};
use crate::scheduling::processes::{binary, Process};
use crate::servers::free_ports;

impl ControlPlane {
    /// Starts the control plane `shape` asks for, in a temporary folder
    /// the control plane keeps (logs, data, certificates).
    pub fn start(shape: &Shape) -> Result<ControlPlane, String> {
        let dir = tempfile::Builder::new()
            .prefix("capstan-bench-density-")
            .tempdir()
            .map_err(|e| format!("temporary folder: {e}"))?;
        let scheduler_config = dir.path().join("scheduler.yaml");
        std::fs::write(&scheduler_config, scheduler_configuration(shape.client_qps))
            .map_err(|e| format!("write {}: {e}", scheduler_config.display()))?;
        match shape.cluster {
            false => start_single(shape, dir, &scheduler_config),
            true => super::cluster::start(shape, dir, &scheduler_config),
        }
    }
}

/// kube-scheduler's configuration with density-sized client limits.
fn scheduler_configuration(qps: u32) -> String {
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
         clientConnection:\n  qps: {qps}\n  burst: {qps}\n"
    )
}

fn start_single(
    shape: &Shape,
    dir: TempDir,
    scheduler_config: &Path,
) -> Result<ControlPlane, String> {
    let ports = free_ports(4).map_err(|e| format!("free ports: {e}"))?;
    let data = dir.path().join("data");
    let mut command = Command::new(binary("capstan")?);
    command
        .arg("--data-dir")
        .arg(&data)
        .args(["--secure-port", &ports[0].to_string()])
        .args(["--insecure-port", &ports[1].to_string()])
        .args(["--store-port", &ports[2].to_string()])
        .args(["--peer-port", &ports[3].to_string()])
        .args(["--simulated-nodes", "0", "--log-level", "warn"])
        .arg("--scheduler-config")
        .arg(scheduler_config);
    controller_rates(&mut command, shape.controller_qps);
    let log = dir.path().join("capstan.log");
    let mut process = Process::spawn("capstan", &mut command, log)?;
    process.wait_ready(ports[1], shape.startup_timeout)?;
    Ok(ControlPlane::assemble(
        vec![process],
        ports[1],
        vec![ports[1]],
        data.join("kubeconfig"),
        vec![data.join("store")],
        dir,
    ))
}
