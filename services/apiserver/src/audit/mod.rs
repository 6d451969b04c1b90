//! Auditing as kube-apiserver does it: a policy (`--audit-policy-file`)
//! decides per request how much is recorded ([`policy`]), each request's
//! stages become audit.k8s.io/v1 events ([`event`]), and a backend writes
//! them off the request path ([`log`], rotated by [`rotate`]). The chain
//! step that builds the events is `routes/chain/audit.rs`.

pub mod body;
pub mod event;
pub mod log;
pub mod policy;
pub mod rotate;

use std::sync::Arc;
use std::time::Duration;

pub use event::{Annotations, Event, Level, ObjectReference, ResponseStatus, Stage, UserInfo};
pub use log::{Backend, Counters, LogBackend};
pub use policy::{Decision, Policy, PolicyError};

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("--audit-policy-file {0}")]
    Policy(#[from] PolicyError),
    #[error("--audit-log-path {path}: {source}")]
    Log {
        path: String,
        source: std::io::Error,
    },
}

/// kube-apiserver's audit log flags.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub policy_file: String,
    pub log_path: String,
    pub max_size_mb: u64,
    pub max_backups: usize,
    pub max_age_days: u64,
}

/// A policy and where its events go.
pub struct Auditor {
    pub policy: Policy,
    pub backend: Arc<dyn Backend>,
}

impl Auditor {
    /// The auditor the flags ask for; none (nothing recorded, as in kube)
    /// unless both a policy and a log are given.
    pub fn configured(
        settings: &Settings,
        counters: Counters,
    ) -> Result<Option<Auditor>, AuditError> {
        if settings.policy_file.is_empty() || settings.log_path.is_empty() {
            if settings.policy_file.is_empty() != settings.log_path.is_empty() {
                tracing::warn!("auditing needs both --audit-policy-file and --audit-log-path: no events will be recorded");
            }
            return Ok(None);
        }
        let policy = Policy::load(std::path::Path::new(&settings.policy_file))?;
        let limits = rotate::Limits {
            max_bytes: settings.max_size_mb * 1024 * 1024,
            max_backups: settings.max_backups,
            max_age: (settings.max_age_days > 0)
                .then(|| Duration::from_secs(settings.max_age_days * 24 * 3600)),
        };
        let backend =
            LogBackend::start(&settings.log_path, limits, counters).map_err(|source| {
                AuditError::Log {
                    path: settings.log_path.clone(),
                    source,
                }
            })?;
        Ok(Some(Auditor {
            policy,
            backend: Arc::new(backend),
        }))
    }
}
