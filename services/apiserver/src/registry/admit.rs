//! Where the generic flow calls admission (`crate::admission`): the
//! attributes of a write through a [`Handle`], and a denial as the
//! Kubernetes Status kube-apiserver answers with.

use serde_json::Value;

use super::handle::{Handle, Part};
use crate::admission::{Attributes, Denial, Operation, UserInfo};
use crate::error::ApiError;
use crate::object::meta;

/// One write as admission sees it.
pub(crate) struct Admitted<'a> {
    pub operation: Operation,
    pub namespace: &'a str,
    pub part: Part,
    pub dry_run: bool,
    pub user: &'a UserInfo,
}

impl Handle {
    fn attributes<'a>(
        &'a self,
        write: &'a Admitted<'a>,
        name: &'a str,
        old: Option<&'a Value>,
    ) -> Attributes<'a> {
        let def = self.def();
        Attributes {
            operation: write.operation,
            old_object: old,
            namespace: write.namespace,
            name,
            group: def.group,
            version: def.version,
            resource: def.resource,
            subresource: match write.part {
                Part::Main => "",
                Part::Status => "status",
                Part::Scale => "scale",
            },
            dry_run: write.dry_run,
            user: write.user,
        }
    }

    /// The admission plugins' mutating steps on `object`.
    pub(crate) fn admit(
        &self,
        write: &Admitted<'_>,
        object: &mut Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        if self.admission.is_empty() {
            return Ok(());
        }
        let name = meta::name(object).to_string();
        let attributes = self.attributes(write, &name, old);
        let admitted = self.admission.mutate(&attributes, object);
        admitted.map_err(|denial| self.denied(&name, denial))
    }

    /// The admission plugins' validating steps on what would be stored
    /// (`object`; none for a delete, whose stored object is `old`).
    pub(crate) fn admit_validated(
        &self,
        write: &Admitted<'_>,
        name: &str,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let attributes = self.attributes(write, name, old);
        let admitted = self.admission.validate(&attributes, object);
        admitted.map_err(|denial| self.denied(name, denial))
    }

    /// kube's form: `configmaps "a" is forbidden: <why>`.
    fn denied(&self, name: &str, denial: Denial) -> ApiError {
        let target = self.def().target(name);
        ApiError::Forbidden(format!(
            "{} \"{name}\" is forbidden: {}",
            target.qualified(),
            denial.reason
        ))
    }
}
