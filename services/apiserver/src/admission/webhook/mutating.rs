//! `MutatingAdmissionWebhook`: the matching mutating webhooks called one
//! after another, each on the object as the ones before left it, their
//! JSONPatches applied. A webhook with reinvocationPolicy IfNeeded is
//! called once more when a webhook after it changed the object (kube's
//! reinvocation, once). On a delete, which has no object to change, the
//! matching webhooks are still called (each may refuse, as in kube), and
//! a non-empty patch from one is an error.

use std::sync::Arc;

use serde_json::Value;

use super::super::objects::Objects;
use super::super::{AdmissionError, Admit, Attributes, Operation, Plugin};
use super::call::Caller;
use super::hook::{Hook, Source, MUTATING};
use super::matching;
use super::metrics::WebhookMetrics;
use super::patch;

pub struct MutatingWebhooks {
    source: Source,
    caller: Caller,
}

impl MutatingWebhooks {
    pub fn new(objects: Arc<dyn Objects>, metrics: WebhookMetrics) -> MutatingWebhooks {
        MutatingWebhooks {
            source: Source::new(objects.clone(), MUTATING),
            caller: Caller::new(objects, metrics, "admit"),
        }
    }

    async fn admit(&self, a: &Attributes<'_>, object: &mut Value) -> Result<(), AdmissionError> {
        let hooks = self.source.hooks().await?;
        let mut reinvocable = Vec::new();
        let mut last_change = None;
        for (i, hook) in hooks.iter().enumerate() {
            if !matching::matches(hook, a, Some(&*object), self.source.objects()).await? {
                continue;
            }
            if self.run(hook, a, object).await? {
                last_change = Some(i);
            }
            if hook.reinvoke_if_needed() {
                reinvocable.push(i);
            }
        }
        let Some(last_change) = last_change else {
            return Ok(());
        };
        for i in reinvocable.into_iter().filter(|i| *i < last_change) {
            self.run(&hooks[i], a, object).await?;
        }
        Ok(())
    }

    /// A delete through the matching webhooks, one after another.
    async fn admit_delete(&self, a: &Attributes<'_>) -> Result<(), AdmissionError> {
        let hooks = self.source.hooks().await?;
        for hook in &hooks {
            if !matching::matches(hook, a, None, self.source.objects()).await? {
                continue;
            }
            let patch = self.caller.call(hook, a, None).await?;
            if patch.is_some_and(|p| patch::is_empty(&p) != Some(true)) {
                return Err(AdmissionError::Internal(format!(
                    "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
                    hook.name
                )));
            }
        }
        Ok(())
    }

    /// Calls `hook` and applies its patch; whether the object changed.
    async fn run(
        &self,
        hook: &Hook,
        a: &Attributes<'_>,
        object: &mut Value,
    ) -> Result<bool, AdmissionError> {
        let Some(patch) = self.caller.call(hook, a, Some(&*object)).await? else {
            return Ok(false);
        };
        patch::apply(object, &patch).map_err(|err| {
            AdmissionError::Internal(format!("admission webhook {:?}: {err}", hook.name))
        })
    }
}

impl Plugin for MutatingWebhooks {
    fn name(&self) -> &str {
        "MutatingAdmissionWebhook"
    }

    fn mutate<'a>(&'a self, attributes: &'a Attributes<'a>, object: &'a mut Value) -> Admit<'a> {
        Box::pin(self.admit(attributes, object))
    }

    /// The chain's delete has only a validating phase; this plugin comes
    /// before every validating one, so its webhooks still run first.
    fn validate<'a>(&'a self, attributes: &'a Attributes<'a>, _: Option<&'a Value>) -> Admit<'a> {
        match attributes.operation {
            Operation::Delete => Box::pin(self.admit_delete(attributes)),
            _ => super::super::allow(),
        }
    }
}
