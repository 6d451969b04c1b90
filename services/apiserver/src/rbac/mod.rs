//! Role-based access control (rbac.authorization.k8s.io/v1), as
//! kube-apiserver's RBAC authorizer:
//! - `rule.rs`: one PolicyRule and what it allows;
//! - `objects.rs`, `index.rs`: the Roles, ClusterRoles and bindings the
//!   server holds, indexed by subject so a decision never lists bindings;
//! - `informer.rs`: keeps them current from the registry's watch caches;
//! - `authorizer.rs`: the decision;
//! - `covers.rs`: whether one set of rules covers another (escalation);
//! - `policy.rs`, `reconcile.rs`: the bootstrap policy, reconciled at start;
//! - `aggregation.rs`: the controller that fills aggregated ClusterRoles;
//! - `store.rs`: the server's own reads and writes of RBAC objects;
//! - `requester.rs`: the request's user as the RBAC strategies see it
//!   (their escalation checks live with the kinds, in
//!   `registry/kinds/rbac_escalation.rs`);
//! - `setup.rs`: what `--authorization-mode` starts.

pub mod aggregation;
pub mod authorizer;
pub mod covers;
pub mod for_admission;
pub mod index;
pub mod informer;
pub mod objects;
pub mod policy;
pub mod reconcile;
pub mod requester;
pub mod rule;
pub mod setup;
pub mod store;
