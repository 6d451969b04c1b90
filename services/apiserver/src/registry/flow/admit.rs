//! Where the generic flow calls admission (`crate::admission`): the
//! attributes of a write through a [`Handle`], and a denial as the
//! Kubernetes Status kube-apiserver answers with.

use futures::future::BoxFuture;
use serde_json::Value;

use super::handle::{Handle, Part, Reply};
use crate::admission::{AdmissionError, Attributes, Feedback, Operation};
use crate::auth::UserInfo;
use crate::error::{ApiError, Cause, Refusal, Target};
use crate::object::meta;
use crate::registry::subresource::{Admission, SubresourceWrite};

/// One write as admission sees it.
pub(crate) struct Admitted<'a> {
    pub operation: Operation,
    pub namespace: &'a str,
    pub part: Part,
    pub dry_run: bool,
    pub user: &'a UserInfo,
    /// What the plugins said besides yes or no (warnings for the reply).
    pub feedback: std::sync::Arc<Feedback>,
}

impl Admitted<'_> {
    /// A successful write's reply, with what the plugins said.
    pub fn reply(&self, code: u16, body: Value) -> Reply {
        Reply {
            code,
            body,
            warnings: self.feedback.warnings(),
            annotations: self.feedback.annotations(),
        }
    }
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
            subresource: write.part.subresource(),
            dry_run: write.dry_run,
            user: write.user,
            feedback: &write.feedback,
        }
    }

    /// The admission plugins' mutating steps on `object`.
    pub(crate) async fn admit(
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
        let admitted = self.admission.mutate(&attributes, object).await;
        admitted.map_err(|refusal| self.refused(&name, refusal))
    }

    /// The admission plugins' validating steps on what would be stored
    /// (`object`; none for a delete, whose stored object is `old`).
    pub(crate) async fn admit_validated(
        &self,
        write: &Admitted<'_>,
        name: &str,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        if self.admission.is_empty() {
            return Ok(());
        }
        let attributes = self.attributes(write, name, old);
        let admitted = self.admission.validate(&attributes, object).await;
        admitted.map_err(|refusal| self.refused(name, refusal))
    }

    /// A CREATE of a subresource served by the kind's own code (a pod's
    /// binding), or a CONNECT (a pod's exec): mutating steps, then
    /// validating ones, on its body or options.
    async fn admit_subresource(
        &self,
        operation: Operation,
        write: SubresourceWrite<'_>,
        object: &mut Value,
    ) -> Result<(), ApiError> {
        if self.admission.is_empty() {
            return Ok(());
        }
        let def = self.def();
        let feedback = Feedback::default();
        let attributes = Attributes {
            operation,
            old_object: None,
            namespace: write.namespace,
            name: write.name,
            group: def.group,
            version: def.version,
            resource: def.resource,
            subresource: write.subresource,
            dry_run: write.options.dry_run,
            user: &write.options.user,
            feedback: &feedback,
        };
        let refused = |refusal| self.refused(write.name, refusal);
        self.admission
            .mutate(&attributes, object)
            .await
            .map_err(refused)?;
        let validated = self.admission.validate(&attributes, Some(object)).await;
        validated.map_err(refused)
    }

    /// kube's forms: a denial is `configmaps "a" is forbidden: <why>`; a
    /// missing object the write needs is its 404; a webhook's refusal
    /// keeps the code and reason it gave.
    fn refused(&self, name: &str, refusal: AdmissionError) -> ApiError {
        match refusal {
            AdmissionError::Denied(denial) => {
                let target = self.def().target(name);
                ApiError::Forbidden(format!(
                    "{} \"{name}\" is forbidden: {}",
                    target.qualified(),
                    denial.reason
                ))
            }
            AdmissionError::NotFound { resource, name } => ApiError::NotFound(Target {
                group: String::new(),
                resource,
                name,
            }),
            AdmissionError::Invalid(fields) => {
                let causes = fields
                    .into_iter()
                    .map(|f| Cause::invalid(f.field, &f.value, f.why))
                    .collect();
                ApiError::invalid(self.def().target(name), self.def().kind, causes)
            }
            AdmissionError::Refused { reason, message } => ApiError::Refused(Box::new(Refusal {
                target: self.def().target(name),
                reason,
                message,
            })),
            AdmissionError::Unavailable(why) => {
                ApiError::Internal(format!("admission of {name}: {why}"))
            }
            AdmissionError::Rejected(rejection) => ApiError::Status {
                code: rejection.code,
                reason: rejection.reason,
                message: rejection.message,
            },
            AdmissionError::BadRequest(why) => ApiError::BadRequest(why),
            // kube's NewInternalError wording.
            AdmissionError::Internal(why) => {
                ApiError::Internal(format!("Internal error occurred: {why}"))
            }
        }
    }
}

impl Admission for Handle {
    fn admit_create<'a>(
        &'a self,
        write: SubresourceWrite<'a>,
        object: &'a mut Value,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(self.admit_subresource(Operation::Create, write, object))
    }

    fn admit_connect<'a>(
        &'a self,
        write: SubresourceWrite<'a>,
        options: &'a mut Value,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(self.admit_subresource(Operation::Connect, write, options))
    }
}
