//! Who asks and whether they may: the vocabulary of trust every layer
//! shares, and nothing else (it imports no other layer of the server).
//!
//! - [`UserInfo`]: the user a request acts as (kube's `user.Info`), as
//!   authentication and impersonation decide it;
//! - [`Attributes`]: what a request asks (kube's `authorizer.Attributes`),
//!   and the denial message kube-apiserver writes for it;
//! - [`Authorizer`] and its [`Decision`]: allow, deny or no opinion, with
//!   the rules an authorizer can list ([`PolicyRule`]) for rules reviews
//!   and RBAC's escalation checks;
//! - [`Mode`]: the `--authorization-mode` names.
//!
//! The handler chain authorizes requests with it, admission asks it from
//! CEL, the registry's type rules (RBAC's escalation prevention) ask it
//! for the writer, and `rbac/` implements it. Authorizers are combined in
//! `--authorization-mode` order by `startup`; a new one implements
//! [`Authorizer`] and adds a [`Mode`].

mod attributes;
mod authorizer;
mod modes;
mod rule;
mod user;

pub use attributes::Attributes;
pub use authorizer::{
    AlwaysAllow, AlwaysDeny, Authorizer, AuthorizerSlot, Decision, PrivilegedGroups, RuleList,
    Union,
};
pub use modes::{parse_modes, Mode};
pub use rule::{url_covers, PolicyRule};
pub use user::{
    node_name, service_account_groups, service_account_user, UserInfo, ANONYMOUS, AUTHENTICATED,
    MASTERS, NODES_GROUP, UNAUTHENTICATED,
};
