//! rbac.authorization.k8s.io/v1: Roles, ClusterRoles and their bindings,
//! with escalation prevention ([`escalation`]) over [`covers`].

pub mod covers;
pub mod escalation;
pub mod roles;
