//! The admission plugins in their order, and what a refusal is.

use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use serde_json::Value;

use super::attributes::Attributes;

/// Why a plugin refused a request: kube's 403, `<resource> "<name>" is
/// forbidden: <reason>`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{plugin}: {reason}")]
pub struct Denial {
    /// The plugin that refused.
    pub plugin: String,
    pub reason: String,
}

/// What stops a request in admission, one form per status kube answers.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AdmissionError {
    #[error(transparent)]
    Denied(#[from] Denial),
    /// Something the request needs does not exist (kube's 404, as
    /// `namespaces "x" not found`).
    #[error("{resource} \"{name}\" not found")]
    NotFound { resource: String, name: String },
    /// The objects a plugin needs could not be read or written (500).
    #[error("{0}")]
    Unavailable(String),
    /// The object's own fields break a plugin's rules (kube's 422
    /// Invalid, one cause per field).
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    Invalid(Vec<BadField>),
    /// A policy's refusal with the reason it chose (`Invalid`,
    /// `Forbidden`, `Unauthorized`, `RequestEntityTooLarge`): kube's
    /// `<resource> "<name>" is forbidden: <message>` with that reason's code.
    #[error("{message}")]
    Refused {
        reason: &'static str,
        message: String,
    },
    /// A refusal that says its own status, as a webhook's does: the
    /// client sees this code, reason and message as they are.
    #[error("{0}")]
    Rejected(Rejection),
    /// The request itself cannot be admitted as asked (kube's 400), such
    /// as a dry run through a webhook with side effects.
    #[error("{0}")]
    BadRequest(String),
    /// Admission itself failed (kube's 500 InternalError), such as a
    /// webhook that could not be called under failurePolicy Fail.
    #[error("{0}")]
    Internal(String),
}

/// One field a plugin finds invalid: where, its value, and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: Invalid value: {value:?}: {why}")]
pub struct BadField {
    pub field: String,
    pub value: String,
    pub why: String,
}

/// A refusal with its own HTTP code and reason (kube's `StatusError`
/// built from a webhook's `status`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct Rejection {
    pub code: u16,
    /// kube's `reason`; may be empty, as a webhook may leave it.
    pub reason: String,
    pub message: String,
}

impl AdmissionError {
    /// A 403 from `plugin`.
    pub fn denied(plugin: &str, reason: impl Into<String>) -> AdmissionError {
        AdmissionError::Denied(Denial {
            plugin: plugin.into(),
            reason: reason.into(),
        })
    }
}

/// One step's answer; a step may wait on the store (quota, lookups) or,
/// later, on a webhook.
pub type Admit<'a> = BoxFuture<'a, Result<(), AdmissionError>>;

/// What a step that has nothing to say answers.
pub fn allow<'a>() -> Admit<'a> {
    Box::pin(std::future::ready(Ok(())))
}

/// An admission plugin: either step may be left as it is (allowing).
pub trait Plugin: Send + Sync {
    /// kube's name of the plugin (`NamespaceLifecycle`).
    fn name(&self) -> &str;

    /// May change the object about to be validated and stored (not on
    /// delete, which has none).
    fn mutate<'a>(&'a self, _attributes: &'a Attributes<'a>, _object: &'a mut Value) -> Admit<'a> {
        allow()
    }

    /// May refuse the object as it will be stored (on delete: none; the
    /// old object is in the attributes).
    fn validate<'a>(
        &'a self,
        _attributes: &'a Attributes<'a>,
        _object: Option<&'a Value>,
    ) -> Admit<'a> {
        allow()
    }
}

/// The plugins, run in order: every mutating step, then (after the
/// strategy validated) every validating step. The plugins are installed
/// once, after the resource types they look at are being served; until
/// then (and by default) the chain is empty.
#[derive(Clone, Default)]
pub struct Chain {
    plugins: OnceLock<Vec<Arc<dyn Plugin>>>,
}

impl Chain {
    pub fn new(plugins: Vec<Arc<dyn Plugin>>) -> Chain {
        let chain = Chain::default();
        chain.install(plugins);
        chain
    }

    /// Puts the plugins in (the first call only: the chain never changes
    /// while requests run through it).
    pub fn install(&self, plugins: Vec<Arc<dyn Plugin>>) -> bool {
        self.plugins.set(plugins).is_ok()
    }

    fn plugins(&self) -> &[Arc<dyn Plugin>] {
        self.plugins.get().map(Vec::as_slice).unwrap_or_default()
    }

    pub fn is_empty(&self) -> bool {
        self.plugins().is_empty()
    }

    /// The plugins' names, in order.
    pub fn names(&self) -> Vec<String> {
        self.plugins()
            .iter()
            .map(|p| p.name().to_string())
            .collect()
    }

    /// Every plugin's mutating step, in order; the first refusal stops it.
    pub async fn mutate(
        &self,
        attributes: &Attributes<'_>,
        object: &mut Value,
    ) -> Result<(), AdmissionError> {
        for plugin in self.plugins() {
            plugin.mutate(attributes, object).await?;
        }
        Ok(())
    }

    /// Every plugin's validating step, in order.
    pub async fn validate(
        &self,
        attributes: &Attributes<'_>,
        object: Option<&Value>,
    ) -> Result<(), AdmissionError> {
        for plugin in self.plugins() {
            plugin.validate(attributes, object).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::Operation;
    use super::*;
    use crate::auth::UserInfo;
    use serde_json::json;

    struct Label;

    impl Plugin for Label {
        fn name(&self) -> &str {
            "Label"
        }

        fn mutate<'a>(&'a self, _: &'a Attributes<'a>, object: &'a mut Value) -> Admit<'a> {
            object["metadata"]["labels"]["seen"] = "yes".into();
            allow()
        }
    }

    struct NeedsLabel;

    impl Plugin for NeedsLabel {
        fn name(&self) -> &str {
            "NeedsLabel"
        }

        fn validate<'a>(&'a self, _: &'a Attributes<'a>, object: Option<&'a Value>) -> Admit<'a> {
            let seen = object.is_some_and(|o| o["metadata"]["labels"]["seen"] == "yes");
            Box::pin(async move {
                match seen {
                    true => Ok(()),
                    false => Err(AdmissionError::denied(self.name(), "not seen")),
                }
            })
        }
    }

    #[tokio::test]
    async fn mutating_steps_run_before_validating_ones_in_order() {
        let user = UserInfo::anonymous();
        let feedback = super::super::Feedback::default();
        let attributes = Attributes {
            operation: Operation::Create,
            old_object: None,
            namespace: "ns",
            name: "a",
            group: "",
            version: "v1",
            resource: "configmaps",
            subresource: "",
            dry_run: false,
            user: &user,
            feedback: &feedback,
        };
        let chain = Chain::new(vec![Arc::new(NeedsLabel), Arc::new(Label)]);
        assert_eq!(chain.names(), ["NeedsLabel", "Label"]);
        let mut object = json!({"metadata": {"name": "a"}});
        chain.mutate(&attributes, &mut object).await.unwrap();
        assert_eq!(chain.validate(&attributes, Some(&object)).await, Ok(()));
        let unseen = json!({"metadata": {}});
        let denied = chain.validate(&attributes, Some(&unseen)).await;
        assert_eq!(
            denied.unwrap_err(),
            AdmissionError::denied("NeedsLabel", "not seen")
        );
        assert!(Chain::default().is_empty());
        assert!(!chain.install(Vec::new()), "installed once only");
    }
}
