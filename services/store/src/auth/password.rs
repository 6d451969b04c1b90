//! Passwords, hashed with bcrypt as etcd hashes them (so a hash moves
//! between etcd and capstan unchanged). A bcrypt run costs tens of
//! milliseconds of CPU by design; anyone may ask to authenticate, so runs
//! go through a few slots, one per core, and a request that would wait
//! behind too many others is refused with etcd's "too many requests"
//! instead of queueing without bound.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::error::{Result, StoreError};

/// etcd's `--bcrypt-cost` default and bounds.
pub const DEFAULT_COST: u32 = 10;
pub const MIN_COST: u32 = 4;
pub const MAX_COST: u32 = 31;

/// bcrypt reads this many bytes of a password.
const MAX_PASSWORD_BYTES: usize = 72;

/// Runs that may wait for a slot before more are refused.
const MAX_WAITING: usize = 64;

#[derive(Clone)]
pub struct Passwords {
    cost: u32,
    slots: Arc<Semaphore>,
    waiting: Arc<AtomicUsize>,
}

impl Passwords {
    pub fn new(cost: u32) -> Passwords {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Passwords {
            cost,
            slots: Arc::new(Semaphore::new(cores)),
            waiting: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The bcrypt hash of `password` ("$2a$", as etcd's Go bcrypt writes).
    pub async fn hash(&self, password: String) -> Result<String> {
        check_length(&password)?;
        let cost = self.cost;
        self.run(move || {
            bcrypt::hash_with_result(password, cost)
                .map(|parts| parts.format_for_version(bcrypt::Version::TwoA))
                .map_err(|err| StoreError::Storage(format!("bcrypt: {err}")))
        })
        .await
    }

    /// Whether `password` matches `hash`; a malformed hash matches nothing.
    pub async fn verify(&self, password: String, hash: Vec<u8>) -> Result<bool> {
        if check_length(&password).is_err() {
            return Ok(false);
        }
        self.run(move || {
            let hash = String::from_utf8_lossy(&hash);
            Ok(bcrypt::verify(password, &hash).unwrap_or(false))
        })
        .await
    }

    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<T> {
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= MAX_WAITING {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(StoreError::TooManyRequests);
        }
        let slot = self.slots.clone().acquire_owned().await;
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        let slot = slot.map_err(|_| StoreError::Stopped)?;
        let result = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            work()
        })
        .await;
        result.map_err(|err| StoreError::Storage(format!("bcrypt: {err}")))?
    }
}

fn check_length(password: &str) -> Result<()> {
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(StoreError::PasswordTooLong);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hash_verifies_its_password_only() {
        let passwords = Passwords::new(MIN_COST);
        let hash = passwords.hash("s3cret".into()).await.unwrap();
        assert!(hash.starts_with("$2a$04$"), "{hash}");
        assert!(passwords
            .verify("s3cret".into(), hash.clone().into_bytes())
            .await
            .unwrap());
        assert!(!passwords
            .verify("secret".into(), hash.into_bytes())
            .await
            .unwrap());
        assert!(!passwords
            .verify("x".into(), b"not a hash".to_vec())
            .await
            .unwrap());
    }

    #[tokio::test]
    async fn passwords_longer_than_bcrypt_reads_are_refused() {
        let passwords = Passwords::new(MIN_COST);
        let long = "x".repeat(73);
        assert_eq!(
            passwords.hash(long.clone()).await,
            Err(StoreError::PasswordTooLong)
        );
        let hash = passwords.hash("x".repeat(72)).await.unwrap();
        assert!(!passwords.verify(long, hash.into_bytes()).await.unwrap());
    }
}
