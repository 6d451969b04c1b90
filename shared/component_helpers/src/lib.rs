//! The scheduling rules kube keeps in `k8s.io/component-helpers` and
//! `k8s.io/api`'s helpers, for the components that need them apart from
//! the scheduler's own precompiled model (the DaemonSet controller, the
//! taint-eviction controller, the simulated kubelet's admission): plain
//! functions of k8s-openapi types, no client, no state.

pub mod node_affinity;
pub mod tolerations;
