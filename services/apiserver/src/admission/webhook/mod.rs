//! The admission webhooks (kube's `MutatingAdmissionWebhook` and
//! `ValidatingAdmissionWebhook`): for each write, the webhooks of the
//! MutatingWebhookConfigurations and ValidatingWebhookConfigurations
//! whose rules and selectors match it are called with an AdmissionReview
//! over HTTPS; a mutating webhook's JSONPatch changes the object, and any
//! webhook may refuse the write (mutating ones on deletes too). Their
//! warnings reach the client and their audit annotations the audit event.
//!
//! ```text
//! hook.rs       a configuration's webhooks as the plugins use them, read from the watch cache
//! matching.rs   rules (operations, groups, versions, resources/subresources, scope), matchPolicy,
//!               namespaceSelector and objectSelector
//! conditions.rs matchConditions (CEL, compiled once per expression)
//! selector.rs   metav1.LabelSelector evaluation
//! endpoint.rs   where a webhook is: clientConfig.url, or clientConfig.service through its Endpoints
//! client.rs     one HTTPS POST with rustls, trusting caBundle
//! pool.rs       connections kept open between calls, per address, TLS name and CA
//! review.rs     the AdmissionReview request, and the response checked and read
//! patch.rs      a response's JSONPatch applied to the object
//! call.rs       one webhook called: timeout, failurePolicy, metrics, tracing span
//! mutating.rs   the mutating plugin (in order, reinvocationPolicy IfNeeded)
//! validating.rs the validating plugin (all matching webhooks at once)
//! metrics.rs    the call latency histogram
//! ```

mod call;
pub mod client;
mod conditions;
pub mod endpoint;
mod hook;
mod matching;
mod metrics;
mod mutating;
mod patch;
pub mod pool;
mod review;
mod selector;
mod validating;

pub use metrics::WebhookMetrics;
pub use mutating::MutatingWebhooks;
pub use validating::ValidatingWebhooks;
