//! The admission plugins in their order, and what a denial is.

use std::sync::Arc;

use serde_json::Value;

use super::attributes::Attributes;

/// Why a plugin refused a request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{plugin}: {reason}")]
pub struct Denial {
    /// The plugin that refused.
    pub plugin: String,
    pub reason: String,
}

/// An admission plugin: either step may be left as it is (allowing).
pub trait Plugin: Send + Sync {
    fn name(&self) -> &str;

    /// May change the object about to be validated and stored (not on
    /// delete, which has none).
    fn mutate(&self, _attributes: &Attributes<'_>, _object: &mut Value) -> Result<(), Denial> {
        Ok(())
    }

    /// May refuse the object as it will be stored (on delete: none; the
    /// old object is in the attributes).
    fn validate(
        &self,
        _attributes: &Attributes<'_>,
        _object: Option<&Value>,
    ) -> Result<(), Denial> {
        Ok(())
    }
}

/// The plugins, run in order: every mutating step, then (after the
/// strategy validated) every validating step. Empty by default.
#[derive(Clone, Default)]
pub struct Chain {
    plugins: Vec<Arc<dyn Plugin>>,
}

impl Chain {
    pub fn new(plugins: Vec<Arc<dyn Plugin>>) -> Chain {
        Chain { plugins }
    }

    pub fn is_empty(&self) -> bool {
        self.plugins.is_empty()
    }

    /// Every plugin's mutating step, in order; the first denial stops it.
    pub fn mutate(&self, attributes: &Attributes<'_>, object: &mut Value) -> Result<(), Denial> {
        self.plugins
            .iter()
            .try_for_each(|p| p.mutate(attributes, object))
    }

    /// Every plugin's validating step, in order.
    pub fn validate(
        &self,
        attributes: &Attributes<'_>,
        object: Option<&Value>,
    ) -> Result<(), Denial> {
        self.plugins
            .iter()
            .try_for_each(|p| p.validate(attributes, object))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Operation, UserInfo};
    use super::*;
    use serde_json::json;

    struct Label;

    impl Plugin for Label {
        fn name(&self) -> &str {
            "Label"
        }

        fn mutate(&self, _: &Attributes<'_>, object: &mut Value) -> Result<(), Denial> {
            object["metadata"]["labels"]["seen"] = "yes".into();
            Ok(())
        }
    }

    struct NeedsLabel;

    impl Plugin for NeedsLabel {
        fn name(&self) -> &str {
            "NeedsLabel"
        }

        fn validate(&self, _: &Attributes<'_>, object: Option<&Value>) -> Result<(), Denial> {
            match object.is_some_and(|o| o["metadata"]["labels"]["seen"] == "yes") {
                true => Ok(()),
                false => Err(Denial {
                    plugin: self.name().into(),
                    reason: "not seen".into(),
                }),
            }
        }
    }

    #[test]
    fn mutating_steps_run_before_validating_ones_in_order() {
        let user = UserInfo::anonymous();
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
        };
        let chain = Chain::new(vec![Arc::new(NeedsLabel), Arc::new(Label)]);
        let mut object = json!({"metadata": {"name": "a"}});
        chain.mutate(&attributes, &mut object).unwrap();
        assert_eq!(chain.validate(&attributes, Some(&object)), Ok(()));
        let denied = chain.validate(&attributes, Some(&json!({"metadata": {}})));
        assert_eq!(denied.unwrap_err().plugin, "NeedsLabel");
        assert!(Chain::default().is_empty());
    }
}
