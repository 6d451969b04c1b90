//! What admission says about a request besides allowing or refusing it:
//! warnings for the client (kube's `Warning: 299 - "<text>"` response
//! headers, which kubectl prints as `Warning: <text>`) and annotations
//! for the request's audit event. Plugins add to it through
//! [`Attributes::feedback`](super::Attributes); the flow takes it into
//! its reply once admission is over.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// One request's warnings and audit annotations, collected as plugins
/// run (a plugin only holds `&Attributes`, so this is shared).
#[derive(Debug, Default)]
pub struct Feedback {
    warnings: Mutex<Vec<String>>,
    annotations: Mutex<BTreeMap<String, String>>,
}

impl Feedback {
    /// Adds a warning; the same text twice is said once, as kube's
    /// warning recorder does.
    pub fn warn(&self, text: impl Into<String>) {
        let text = text.into();
        let mut warnings = lock(&self.warnings);
        if !text.is_empty() && !warnings.contains(&text) {
            warnings.push(text);
        }
    }

    /// Sets an audit annotation (`key` is the plugin's, such as
    /// `pod-security.kubernetes.io/audit-violations`); the first value
    /// given for a key stays, as in kube.
    pub fn annotate(&self, key: impl Into<String>, value: impl Into<String>) {
        lock(&self.annotations)
            .entry(key.into())
            .or_insert_with(|| value.into());
    }

    pub fn warnings(&self) -> Vec<String> {
        lock(&self.warnings).clone()
    }

    pub fn annotations(&self) -> BTreeMap<String, String> {
        lock(&self.annotations).clone()
    }
}

/// A poisoned lock only means a plugin panicked mid-push; what it holds
/// is still a list of strings.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_said_once_in_order_and_first_annotation_stays() {
        let feedback = Feedback::default();
        feedback.warn("b");
        feedback.warn("a");
        feedback.warn("b");
        feedback.warn("");
        assert_eq!(feedback.warnings(), ["b", "a"]);
        feedback.annotate("k", "1");
        feedback.annotate("k", "2");
        assert_eq!(feedback.annotations()["k"], "1");
    }
}
