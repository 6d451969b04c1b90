//! Reading and writing the Lease with optimistic concurrency: every write
//! carries the resourceVersion it was based on, so two candidates racing
//! for a free lease cannot both win (one gets 409 Conflict).

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::chrono::Utc;
use kube::api::{ObjectMeta, PostParams};
use kube::Api;
use tokio::time::Instant;

use super::record::{self, Observed, Record};
use super::LeaderElectionConfig;

pub(super) struct LeaseLock {
    api: Api<Lease>,
    config: LeaderElectionConfig,
    /// The Lease as last read or written by us.
    lease: Option<Lease>,
    observed: Option<Observed>,
}

impl LeaseLock {
    pub(super) fn new(client: kube::Client, config: LeaderElectionConfig) -> LeaseLock {
        LeaseLock {
            api: Api::namespaced(client, &config.namespace),
            config,
            lease: None,
            observed: None,
        }
    }

    pub(super) fn config(&self) -> &LeaderElectionConfig {
        &self.config
    }

    pub(super) fn lease_name(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    fn leading(&self) -> bool {
        self.observed
            .as_ref()
            .is_some_and(|o| o.record.holder == self.config.identity)
    }

    /// After losing: never write the Lease from a stale belief we lead.
    pub(super) fn forget_leadership(&mut self) {
        self.lease = None;
        self.observed = None;
    }

    /// One round of client-go's `tryAcquireOrRenew`: true if we hold the
    /// Lease now. Failures are logged, never fatal.
    pub(super) async fn try_acquire_or_renew(&mut self) -> bool {
        // The leader renews from its own last write, saving a read; a
        // conflict sends it back to reading.
        if self.leading() {
            if let Some(lease) = self.lease.clone() {
                let current = self
                    .observed
                    .as_ref()
                    .map(|o| o.record.clone())
                    .unwrap_or_default();
                if self.write(lease, &current).await {
                    return true;
                }
            }
        }
        let lease = match self.api.get_opt(&self.config.name).await {
            Ok(Some(lease)) => lease,
            Ok(None) => return self.create().await,
            Err(error) => {
                tracing::warn!(lease = %self.lease_name(), %error, "reading the leader-election lease failed");
                return false;
            }
        };
        let current = lease
            .spec
            .as_ref()
            .map(Record::from_spec)
            .unwrap_or_default();
        let now = Instant::now();
        let observed = Observed::saw(self.observed.as_ref(), current.clone(), now);
        let blocked =
            observed.held_by_other(&self.config.identity, self.config.lease_duration, now);
        self.observed = Some(observed);
        self.lease = Some(lease.clone());
        if blocked {
            return false;
        }
        self.write(lease, &current).await
    }

    async fn create(&mut self) -> bool {
        let record = record::first(
            &self.config.identity,
            self.config.lease_duration,
            Utc::now(),
        );
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.config.name.clone()),
                namespace: Some(self.config.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(record.to_spec()),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(created) => {
                self.remember(created, record);
                true
            }
            Err(error) => {
                tracing::debug!(lease = %self.lease_name(), %error, "creating the leader-election lease failed");
                false
            }
        }
    }

    /// Writes our claim onto `lease` (as read, with its resourceVersion).
    async fn write(&mut self, mut lease: Lease, current: &Record) -> bool {
        let record = record::claim(
            current,
            &self.config.identity,
            self.config.lease_duration,
            Utc::now(),
        );
        lease.spec = Some(record.to_spec());
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.remember(written, record);
                true
            }
            Err(error) => {
                tracing::debug!(lease = %self.lease_name(), %error, "writing the leader-election lease failed");
                // Whatever is there now must be read before the next try.
                self.lease = None;
                false
            }
        }
    }

    fn remember(&mut self, lease: Lease, record: Record) {
        self.observed = Some(Observed {
            record,
            at: Instant::now(),
        });
        self.lease = Some(lease);
    }

    /// Writes an empty holder if we still hold the Lease.
    pub(super) async fn release(&mut self) {
        let (Some(mut lease), Some(observed)) = (self.lease.take(), self.observed.take()) else {
            return;
        };
        if observed.record.holder != self.config.identity {
            return;
        }
        lease.spec = Some(record::release(&observed.record, Utc::now()).to_spec());
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => tracing::info!(lease = %self.lease_name(), "released the lease"),
            Err(error) => {
                tracing::warn!(lease = %self.lease_name(), %error, "releasing the lease failed; it will lapse")
            }
        }
    }
}
