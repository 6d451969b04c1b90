//! Audit: one record per request, with who asked for what and the answer.
//! The first sink writes them to the trace log at debug level.

use super::authentication::User;
use crate::routes::request_info::RequestInfo;

pub struct Event<'a> {
    pub user: &'a User,
    pub info: &'a RequestInfo,
    pub code: u16,
}

pub trait AuditSink: Send + Sync {
    fn record(&self, event: &Event);
}

pub struct TraceSink;

impl AuditSink for TraceSink {
    fn record(&self, event: &Event) {
        tracing::debug!(
            user = %event.user.name,
            verb = event.info.verb.as_str(),
            resource = %event.info.resource,
            namespace = event.info.namespace.as_deref().unwrap_or(""),
            name = event.info.name.as_deref().unwrap_or(""),
            code = event.code,
            "audit"
        );
    }
}
