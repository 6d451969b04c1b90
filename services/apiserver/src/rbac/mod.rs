//! Role-based access control (rbac.authorization.k8s.io/v1), as
//! kube-apiserver's RBAC authorizer (a PolicyRule and what it allows is
//! [`crate::auth::PolicyRule`], the rules every authorizer lists):
//! - `objects.rs`, `index.rs`: the Roles, ClusterRoles and bindings the
//!   server holds, indexed by subject so a decision never lists bindings;
//! - `informer.rs`: keeps them current from the registry's watch caches;
//! - `authorizer.rs`: the decision;
//! - `policy.rs`, `controller_policy.rs`, `component_policy.rs`,
//!   `reconcile.rs`: the bootstrap policy (the controllers' roles and the
//!   scheduler's, the nodes' and kube-proxy's apart; `bootstrap_objects.rs`
//!   the shapes they all write), reconciled at start;
//! - `aggregation.rs`: the controller that fills aggregated ClusterRoles;
//! - `store.rs`: the server's own reads and writes of RBAC objects;
//! - `start.rs`: what the `RBAC` authorization mode starts.
//!
//! Escalation prevention is a type rule of the RBAC kinds, in the
//! registry's `kinds/`; it asks the authorizers through [`crate::auth`].

pub mod aggregation;
pub mod authorizer;
pub mod bootstrap_objects;
pub mod component_policy;
pub mod controller_policy;
pub mod index;
pub mod informer;
pub mod objects;
pub mod policy;
pub mod reconcile;
pub mod start;
pub mod store;
