//! capstan-scheduler: kube-scheduler's default profile as an ordinary API
//! client.
//!
//! Layers, bottom up (each uses only the ones below it):
//! - `model`: quantities, resources, selectors, taints, `PodInfo`, `NodeInfo`.
//! - `config`: the KubeSchedulerConfiguration file, defaulted and validated.
//! - `framework`: extension points, plugin registry, profiles, the cycle state,
//!   running filters and scores over nodes, the FitError message.
//! - `plugins`: the default profile's plugins, one module each.
//! - `cache`: nodes and their pods, assumed pods, generation-based snapshots.
//! - `queue`: activeQ, backoffQ, unschedulable pods, nominated pods.
//! - `preemption`: victims, candidates, the choice of a node.
//! - `core`: one scheduling cycle and its binding cycle.

pub mod cache;
pub mod config;
pub mod framework;
pub mod model;
pub mod plugins;
pub mod queue;
