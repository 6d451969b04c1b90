//! What a check of the Pod Security Standards is, and what it finds.

use super::super::levels::Level;
use super::super::pod::PodView;

/// One failed check: kube's `ForbiddenReason` and `ForbiddenDetail`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub reason: String,
    pub detail: String,
}

impl Violation {
    pub fn new(reason: impl Into<String>, detail: impl Into<String>) -> Option<Violation> {
        Some(Violation {
            reason: reason.into(),
            detail: detail.into(),
        })
    }
}

/// One check of the standards.
pub struct Check {
    /// kube's check ID (the order checks run in follows kube's).
    pub id: &'static str,
    pub level: Level,
    /// A baseline check that the restricted level replaces.
    pub overlap: bool,
    /// The standards' minor version the check exists since (v1.<since>).
    pub since: u32,
    pub run: fn(&PodView) -> Option<Violation>,
}
