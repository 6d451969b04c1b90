//! Store leases for objects that expire (events, `--event-ttl`), as
//! kube-apiserver's lease manager hands them out: one lease is shared by
//! every write in a short window, so a burst of events costs one grant,
//! and it lives the TTL plus that window, so none expires early.

use std::time::{Duration, Instant};

use tokio::sync::Mutex;

use super::connection::{Call, Connection};
use super::StorageError;

/// The longest a lease is shared (kube-apiserver's
/// `--lease-reuse-duration-seconds` default).
const MAX_REUSE: Duration = Duration::from_secs(60);

struct Granted {
    id: i64,
    at: Instant,
    ttl: Duration,
}

pub struct Leases {
    connection: Connection,
    current: Mutex<Option<Granted>>,
}

/// How long a lease for `ttl` is shared: a twentieth of it, at most a
/// minute.
fn reuse_for(ttl: Duration) -> Duration {
    (ttl / 20).min(MAX_REUSE)
}

impl Leases {
    pub fn new(connection: &Connection) -> Leases {
        Leases {
            connection: connection.clone(),
            current: Mutex::new(None),
        }
    }

    /// A lease under which an object written now lives at least `ttl`.
    pub async fn for_ttl(&self, ttl: Duration) -> Result<i64, StorageError> {
        let mut current = self.current.lock().await;
        if let Some(granted) = current.as_ref() {
            if granted.ttl == ttl && granted.at.elapsed() < reuse_for(ttl) {
                return Ok(granted.id);
            }
        }
        let seconds = (ttl + reuse_for(ttl)).as_secs_f64().ceil() as i64;
        // A grant that fails after reaching the store leaves a lease that
        // simply expires, so it is retried like a read.
        let response = self
            .connection
            .unary(Call::Read, |client| async move {
                client.lease_client().grant(seconds, None).await
            })
            .await?;
        *current = Some(Granted {
            id: response.id(),
            at: Instant::now(),
            ttl,
        });
        Ok(response.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_shared_for_a_twentieth_of_the_ttl_at_most_a_minute() {
        assert_eq!(
            reuse_for(Duration::from_secs(3600)),
            Duration::from_secs(60)
        );
        assert_eq!(reuse_for(Duration::from_secs(20)), Duration::from_secs(1));
    }
}
