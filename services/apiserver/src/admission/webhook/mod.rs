//! The admission webhooks (kube's `MutatingAdmissionWebhook` and
//! `ValidatingAdmissionWebhook`): for each write, the webhooks of the
//! MutatingWebhookConfigurations and ValidatingWebhookConfigurations
//! whose rules and selectors match it are called with an AdmissionReview
//! over HTTPS; a mutating webhook's JSONPatch changes the object, and any
//! webhook may refuse the write.
//!
//! ```text
//! hook.rs       a configuration's webhooks as the plugins use them, read from the watch cache
//! matching.rs   rules (operations, groups, versions, resources/subresources, scope), matchPolicy,
//!               namespaceSelector and objectSelector
//! selector.rs   metav1.LabelSelector evaluation
//! endpoint.rs   where a webhook is: clientConfig.url, or clientConfig.service through its Endpoints
//! client.rs     one HTTPS POST with rustls, trusting caBundle
//! review.rs     the AdmissionReview request, and the response checked and read
//! patch.rs      a response's JSONPatch applied to the object
//! call.rs       one webhook called: timeout, failurePolicy, metrics, tracing span
//! mutating.rs   the mutating plugin (in order, reinvocationPolicy IfNeeded)
//! validating.rs the validating plugin (all matching webhooks at once)
//! metrics.rs    the call latency histogram
//! ```

mod call;
pub mod client;
pub mod endpoint;
mod hook;
mod matching;
mod metrics;
mod mutating;
mod patch;
mod review;
mod selector;
mod validating;

pub use metrics::WebhookMetrics;
pub use mutating::MutatingWebhooks;
pub use validating::ValidatingWebhooks;
