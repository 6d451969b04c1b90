//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's
//! `leaderelection` does it with kube's defaults (lease 15 s, renew
//! deadline 10 s, retry every 2 s), so exactly one process of a
//! component works at a time.
//!
//! ```no_run
//! # async fn doc(client: kube::Client) {
//! use capstan_client::leader::{LeaderElectionConfig, LeaderElector};
//!
//! let config = LeaderElectionConfig::new("kube-system", "kube-scheduler");
//! let elector = LeaderElector::new(client, config);
//! let leadership = elector.acquire().await;
//! tokio::select! {
//!     _ = leadership.lost() => { /* stop all work at once */ }
//!     _ = async { /* the component's work */ } => {}
//! }
//! leadership.release().await; // on a graceful stop: the next one takes over at once
//! # }
//! ```

mod lease_lock;
pub mod record;

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use lease_lock::LeaseLock;

/// Which Lease, who we are, and the timings.
#[derive(Clone, Debug)]
pub struct LeaderElectionConfig {
    /// The Lease's namespace (`kube-system` for kube's components).
    pub namespace: String,
    /// The Lease's name (`kube-controller-manager`, `kube-scheduler`).
    pub name: String,
    /// This process's identity in the Lease: `<hostname>_<uuid>`.
    pub identity: String,
    /// How long others wait after last seeing the lease renewed before
    /// taking it (`--leader-elect-lease-duration`).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up
    /// leading (`--leader-elect-renew-deadline`); less than the lease duration.
    pub renew_deadline: Duration,
    /// How often to try to take or renew (`--leader-elect-retry-period`).
    pub retry_period: Duration,
}

impl LeaderElectionConfig {
    /// kube's defaults on the Lease `namespace/name`, with a fresh identity.
    pub fn new(namespace: &str, name: &str) -> LeaderElectionConfig {
        LeaderElectionConfig {
            namespace: namespace.to_string(),
            name: name.to_string(),
            identity: default_identity(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// `<hostname>_<uuid>`, kube's holder identity: unique per process even
/// when several run on one host.
pub fn default_identity() -> String {
    let host = hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".to_string());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

/// Takes and keeps one Lease.
pub struct LeaderElector {
    lock: LeaseLock,
}

impl LeaderElector {
    /// An elector on `config`'s Lease through `client`.
    pub fn new(client: kube::Client, config: LeaderElectionConfig) -> LeaderElector {
        LeaderElector {
            lock: LeaseLock::new(client, config),
        }
    }

    /// This elector's identity.
    pub fn identity(&self) -> &str {
        &self.lock.config().identity
    }

    /// Waits until this process holds the Lease (trying every retry
    /// period, jittered), then keeps renewing it in the background. API
    /// errors are logged and retried; drop the future to give up waiting.
    pub async fn acquire(self) -> Leadership {
        let mut lock = self.lock;
        let retry = lock.config().retry_period;
        loop {
            if lock.try_acquire_or_renew().await {
                break;
            }
            tokio::time::sleep(jittered(retry)).await;
        }
        tracing::info!(lease = %lock.lease_name(), identity = %lock.config().identity, "became leader");
        let lost = CancellationToken::new();
        let renewer = tokio::spawn(renew_until_lost(lock, lost.clone()));
        Leadership {
            lost,
            renewer: Some(renewer),
        }
    }
}

/// client-go's jitter: the period plus up to 1.2 times it, at random, so
/// candidates started together do not retry in step.
fn jittered(period: Duration) -> Duration {
    period.mul_f64(1.0 + rand::random::<f64>() * 1.2)
}

/// Renews every retry period; if no renewal succeeds within the renew
/// deadline, leadership is lost. Returns the lock for a release.
async fn renew_until_lost(mut lock: LeaseLock, lost: CancellationToken) -> LeaseLock {
    let (retry, deadline) = (lock.config().retry_period, lock.config().renew_deadline);
    loop {
        tokio::select! {
            _ = lost.cancelled() => return lock,
            _ = tokio::time::sleep(retry) => {}
        }
        let give_up = Instant::now() + deadline;
        let renewed = loop {
            let attempt = tokio::time::timeout_at(give_up, lock.try_acquire_or_renew()).await;
            match attempt {
                Ok(true) => break true,
                Ok(false) if Instant::now() + retry < give_up => {
                    tokio::select! {
                        _ = lost.cancelled() => return lock,
                        _ = tokio::time::sleep(retry) => {}
                    }
                }
                _ => break false,
            }
        };
        if !renewed {
            tracing::error!(lease = %lock.lease_name(), identity = %lock.config().identity, "failed to renew the lease within the renew deadline; leadership lost");
            lock.forget_leadership();
            lost.cancel();
            return lock;
        }
    }
}

/// Holding the Lease. Work must stop as soon as [`Leadership::lost`]
/// resolves; dropping this stops renewing (the Lease then lapses).
pub struct Leadership {
    lost: CancellationToken,
    renewer: Option<JoinHandle<LeaseLock>>,
}

impl Leadership {
    /// Resolves when leadership is lost (renewal failed past the deadline)
    /// or given up.
    pub async fn lost(&self) {
        self.lost.cancelled().await;
    }

    /// A token cancelled when leadership ends, to hand to workers.
    pub fn token(&self) -> CancellationToken {
        self.lost.clone()
    }

    /// Whether this process still leads.
    pub fn is_leading(&self) -> bool {
        !self.lost.is_cancelled()
    }

    /// Gives the Lease up on a graceful stop: renewing stops and the
    /// Lease is written with no holder, so another candidate takes over
    /// at its next try instead of waiting out the lease duration.
    pub async fn release(mut self) {
        let still_leading = self.is_leading();
        self.lost.cancel();
        let Some(renewer) = self.renewer.take() else {
            return;
        };
        let Ok(mut lock) = renewer.await else { return };
        if still_leading {
            lock.release().await;
        }
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        self.lost.cancel();
    }
}

#[cfg(test)]
mod tests;
