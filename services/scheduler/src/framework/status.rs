//! The outcome of a plugin call, with kube's codes.

use std::borrow::Cow;

/// kube's status codes. `Unschedulable` may be fixed by preemption;
/// `UnschedulableAndUnresolvable` may not (preemption skips such nodes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    Success,
    Error,
    Unschedulable,
    UnschedulableAndUnresolvable,
    /// A PreFilter or PreScore plugin with nothing to do for this pod: its
    /// Filter or Score is skipped for the cycle.
    Skip,
}

/// A plugin's verdict: a code, the reasons (what the FitError message counts)
/// and the plugin that gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: Code,
    pub reasons: Vec<Cow<'static, str>>,
    pub plugin: &'static str,
}

impl Status {
    pub const fn success() -> Status {
        Status {
            code: Code::Success,
            reasons: Vec::new(),
            plugin: "",
        }
    }

    pub fn skip() -> Status {
        Status {
            code: Code::Skip,
            reasons: Vec::new(),
            plugin: "",
        }
    }

    pub fn new(code: Code, reason: impl Into<Cow<'static, str>>) -> Status {
        Status {
            code,
            reasons: vec![reason.into()],
            plugin: "",
        }
    }

    pub fn unschedulable(reason: impl Into<Cow<'static, str>>) -> Status {
        Status::new(Code::Unschedulable, reason)
    }

    pub fn unresolvable(reason: impl Into<Cow<'static, str>>) -> Status {
        Status::new(Code::UnschedulableAndUnresolvable, reason)
    }

    pub fn error(reason: impl Into<Cow<'static, str>>) -> Status {
        Status::new(Code::Error, reason)
    }

    pub fn with_plugin(mut self, plugin: &'static str) -> Status {
        self.plugin = plugin;
        self
    }

    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }

    pub fn is_skip(&self) -> bool {
        self.code == Code::Skip
    }

    pub fn is_rejected(&self) -> bool {
        matches!(
            self.code,
            Code::Unschedulable | Code::UnschedulableAndUnresolvable
        )
    }

    /// The reasons joined as kube's `Status.Message()` does.
    pub fn message(&self) -> String {
        self.reasons.join(", ")
    }
}
