//! `ValidatingAdmissionWebhook`: the matching validating webhooks called
//! all at once on the object as it will be stored (the old one on a
//! delete); any refusal refuses the write, the first in the webhooks'
//! order being the one the client sees.

use std::sync::Arc;

use futures::future::join_all;
use serde_json::Value;

use super::super::objects::Objects;
use super::super::{AdmissionError, Admit, Attributes, Plugin};
use super::call::Caller;
use super::hook::{Source, VALIDATING};
use super::matching;
use super::metrics::WebhookMetrics;

pub struct ValidatingWebhooks {
    source: Source,
    caller: Caller,
}

impl ValidatingWebhooks {
    pub fn new(objects: Arc<dyn Objects>, metrics: WebhookMetrics) -> ValidatingWebhooks {
        ValidatingWebhooks {
            source: Source::new(objects.clone(), VALIDATING),
            caller: Caller::new(objects, metrics, "validating"),
        }
    }

    async fn check(
        &self,
        a: &Attributes<'_>,
        object: Option<&Value>,
    ) -> Result<(), AdmissionError> {
        let hooks = self.source.hooks().await?;
        let mut matched = Vec::new();
        for hook in &hooks {
            if matching::matches(hook, a, object, self.source.objects()).await? {
                matched.push(hook);
            }
        }
        let calls = matched
            .into_iter()
            .map(|hook| self.caller.call(hook, a, object));
        // A validating webhook's patch, if it sends one, is ignored (kube).
        join_all(calls)
            .await
            .into_iter()
            .try_for_each(|r| r.map(drop))
    }
}

impl Plugin for ValidatingWebhooks {
    fn name(&self) -> &str {
        "ValidatingAdmissionWebhook"
    }

    fn validate<'a>(
        &'a self,
        attributes: &'a Attributes<'a>,
        object: Option<&'a Value>,
    ) -> Admit<'a> {
        Box::pin(self.check(attributes, object))
    }
}
