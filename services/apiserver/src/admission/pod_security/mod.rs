//! `PodSecurity`: kube's Pod Security admission. A namespace's labels
//! (`pod-security.kubernetes.io/enforce|audit|warn` and their
//! `-version`s, [`levels`]) choose a level of the Pod Security Standards
//! per mode; pods are checked against it ([`checks`], on a [`pod::PodView`]):
//! enforce refuses (403, `pods "x" is forbidden: violates PodSecurity
//! "restricted:latest": ...`), warn answers a Warning header, audit adds
//! an audit annotation. Workloads' pod templates get warn and audit only;
//! a namespace's labels are validated, and making its enforce level
//! stricter warns about the pods already there ([`namespaces`]). A
//! PodSecurityConfiguration sets the levels of unlabelled namespaces and
//! exempts users, namespaces and runtime classes ([`config`]).

pub mod checks;
pub mod config;
pub mod levels;
mod namespaces;
mod plugin;
pub mod pod;

pub use plugin::PodSecurity;
