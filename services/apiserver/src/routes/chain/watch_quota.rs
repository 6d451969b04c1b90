//! How many watches one user may hold open (`--max-watches-per-user`).
//! Watches are long-running, so the in-flight limits leave them out, as
//! kube's do; without a bound of their own one client could hold
//! thousands of streams, each with its buffer. Past the bound a new
//! watch is a 429 until one of the user's watches ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::ApiError;

/// Open watches by user name.
#[derive(Debug, Default)]
pub struct WatchQuota {
    /// 0: no bound.
    limit: usize,
    open: Mutex<HashMap<String, usize>>,
}

/// One open watch, counted until dropped.
#[derive(Debug)]
pub struct WatchSlot {
    quota: Arc<WatchQuota>,
    user: String,
}

impl WatchQuota {
    pub fn new(limit: usize) -> Arc<WatchQuota> {
        Arc::new(WatchQuota {
            limit,
            open: Mutex::default(),
        })
    }

    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for one more watch of `user`, or kube's 429 (retry in a
    /// second) when the user holds the bound already.
    pub fn acquire(self: &Arc<Self>, user: &str) -> Result<WatchSlot, ApiError> {
        let mut open = self.open();
        let count = open.entry(user.to_string()).or_default();
        if self.limit > 0 && *count >= self.limit {
            return Err(ApiError::TooManyRequests(1));
        }
        *count += 1;
        Ok(WatchSlot {
            quota: self.clone(),
            user: user.to_string(),
        })
    }
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        let mut open = self.quota.open();
        if let Some(count) = open.get_mut(&self.user) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.user);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_holds_at_most_the_limit_and_a_closed_watch_frees_its_slot() {
        let quota = WatchQuota::new(2);
        let first = quota.acquire("alice").unwrap();
        let _second = quota.acquire("alice").unwrap();
        assert!(matches!(
            quota.acquire("alice"),
            Err(ApiError::TooManyRequests(1))
        ));
        let _bob = quota
            .acquire("bob")
            .expect("another user has slots of his own");
        drop(first);
        let _third = quota
            .acquire("alice")
            .expect("a closed watch frees its slot");
        assert!(WatchQuota::new(0).acquire("x").is_ok());
    }
}
