//! `--workload density`: the control plane at scale, as kube's density
//! test and SIG-scalability's SLOs measure it. Starts the control plane
//! as a user would ([`control_plane`]: `capstan`, or `make cluster`'s
//! shape with [`cluster`]), then, phase by phase:
//!
//! 1. nodes: `capstan-nodes` with N simulated nodes, until all are Ready;
//! 2. ramp: D Deployments of R replicas created through the API, until
//!    every pod is Ready (deployment -> ReplicaSet -> scheduler -> node);
//!    on the cluster, the API server whose controller manager leads is
//!    killed half-way, and the stall measured;
//! 3. churn: Ready pods deleted at a steady rate (their ReplicaSets make
//!    as many), then until every Deployment is whole again;
//! 4. delete: every Deployment deleted, until no pod is left.
//!
//! With `--density-noisy-tenant N`, a [`tenant`] lists every pod from N
//! loops during the churn, and what everyone else got is read from the
//! churn's figures.
//!
//! Throughout: a [`watch`] of every pod (Ready over time, startup
//! latencies), the [`probe`] (the SLOs' API calls), and the [`sampler`]
//! (RSS and CPU of each process, queue depths). [`report`] makes the
//! table, the targets and the JSON; [`plot`] the picture.

mod api;
mod cluster;
mod control_plane;
mod objects;
mod phases;
mod plot;
mod probe;
mod report;
mod sampler;
mod start;
mod tenant;
mod watch;

use std::path::PathBuf;
use std::time::Duration;

use crate::checks::Checks;

/// The phases, in order; samples and latencies carry their index.
pub const PHASES: [&str; 5] = ["start", "nodes", "ramp", "churn", "delete"];

/// The settings of `--workload density`.
#[derive(Debug, Clone)]
pub struct DensityConfig {
    pub nodes: usize,
    pub deployments: usize,
    pub replicas: usize,
    pub churn: Duration,
    /// Pods deleted (and so re-created) per second during the churn.
    pub churn_rate: usize,
    /// `make cluster`'s shape, with the controllers' API server killed mid-ramp.
    pub cluster: bool,
    /// Requests per second of each component's client.
    pub client_qps: u32,
    /// Requests per second of the controller manager's client.
    pub controller_qps: u32,
    /// Connections the bench creates and deletes with.
    pub clients: usize,
    /// Report the run against the targets of a 1,000-node run.
    pub targets: bool,
    /// Loops of a noisy tenant listing every pod during the churn (0: none).
    pub noisy_tenant_loops: usize,
    pub startup_timeout: Duration,
    pub request_timeout: Duration,
    pub json: Option<PathBuf>,
    pub plot: Option<PathBuf>,
    pub progress: bool,
}

impl DensityConfig {
    pub fn pods(&self) -> usize {
        self.deployments * self.replicas
    }
}

/// Runs the density workload and prints what it measured.
pub fn run(config: &DensityConfig, checks: &mut Checks) -> Result<(), String> {
    if config.progress {
        eprintln!(
            "density: {} on loopback, {} nodes, {} Deployments x {} replicas, churn {:?} at {}/s",
            if config.cluster {
                "3 stores + 2 API servers"
            } else {
                "capstan"
            },
            config.nodes,
            config.deployments,
            config.replicas,
            config.churn,
            config.churn_rate
        );
    }
    let measured = phases::run(config, checks)?;
    let report = report::build(config, &measured);
    print!("{}", report::table(&report));
    if config.targets {
        print!("{}", report::targets_table(&report));
    }
    if let Some(path) = &config.json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("write {}: {e}", path.display()))?;
        println!("density JSON: {}", path.display());
    }
    if let Some(path) = &config.plot {
        match plot::write_svg(path, &measured, config) {
            Ok(()) => println!("density plot: {}", path.display()),
            Err(err) => {
                checks.record("density: plot written", false, err);
            }
        }
    }
    Ok(())
}
