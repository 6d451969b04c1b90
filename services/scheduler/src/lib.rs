//! capstan-scheduler: kube-scheduler's default profile as an ordinary API
//! client.
//!
//! Layers, bottom up (each uses only the ones above it in this list):
//! - `model`: quantities, resources, selectors, taints, `PodInfo`, `NodeInfo`.
//! - `config`: the KubeSchedulerConfiguration file, defaulted and validated.
//! - `framework`: extension points, plugin registry, profiles, the cycle state,
//!   running filters and scores over nodes, the FitError message.
//! - `plugins`, `preemption`: the default profile's plugins; `registry` lists them.
//! - `cache`: nodes and their pods, assumed pods, generation-based snapshots.
//! - `queue`: activeQ, backoffQ, unschedulable pods, nominated pods.
//! - `core`: one scheduling cycle and its binding cycle, event handlers.

pub mod cache;
pub mod config;
pub mod core;
pub mod embed;
pub mod framework;
pub mod model;
pub mod options;
pub mod perf;
pub mod plugins;
pub mod preemption;
pub mod queue;
pub mod registry;
pub mod wiring;
