//! How long a failed key waits before it is retried: client-go's
//! `workqueue` rate limiters. The default controller limiter is the
//! larger of a per-key exponential backoff (5 ms doubling to 1000 s) and
//! an overall token bucket (10 retries/s, bursts of 100), so one failing
//! key backs off alone while a storm of failures is also held down.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use parking_lot::Mutex;

use crate::rate::TokenBucket;

/// Decides the delay before a key's next retry.
pub trait RateLimiter<T>: Send + Sync + 'static {
    /// The delay for this retry of `item` (and records the retry).
    fn when(&self, item: &T) -> Duration;
    /// Forgets `item`'s failures: it succeeded, or was given up on.
    fn forget(&self, item: &T);
    /// How many retries `item` has had since it was last forgotten.
    fn num_requeues(&self, item: &T) -> u32;
}

/// `base * 2^failures`, at most `max`, counted per key.
#[derive(Debug)]
pub struct ItemExponentialFailureRateLimiter<T> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<T, u32>>,
}

impl<T> ItemExponentialFailureRateLimiter<T> {
    /// Backoff from `base`, doubling to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        ItemExponentialFailureRateLimiter {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> RateLimiter<T>
    for ItemExponentialFailureRateLimiter<T>
{
    fn when(&self, item: &T) -> Duration {
        let mut failures = self.failures.lock();
        let count = failures.entry(item.clone()).or_insert(0);
        let exponent = *count;
        *count = count.saturating_add(1);
        // 2^31 times any base is past any sane max: stop doubling there.
        let factor = 2u32.checked_pow(exponent.min(31)).unwrap_or(u32::MAX);
        self.base
            .checked_mul(factor)
            .map_or(self.max, |delay| delay.min(self.max))
    }

    fn forget(&self, item: &T) {
        self.failures.lock().remove(item);
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.failures.lock().get(item).copied().unwrap_or(0)
    }
}

/// One token bucket for all keys: an overall retry rate.
#[derive(Debug)]
pub struct BucketRateLimiter {
    bucket: TokenBucket,
}

impl BucketRateLimiter {
    /// `qps` retries a second, bursts of `burst`.
    pub fn new(qps: f64, burst: u32) -> Self {
        BucketRateLimiter {
            bucket: TokenBucket::new(qps, burst),
        }
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        self.bucket.reserve()
    }

    fn forget(&self, _item: &T) {}

    fn num_requeues(&self, _item: &T) -> u32 {
        0
    }
}

/// The longest delay any of its limiters asks for.
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> MaxOfRateLimiter<T> {
    /// Combines `limiters`.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        MaxOfRateLimiter { limiters }
    }
}

impl<T: 'static> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        // Every limiter must record the retry, so no short-circuit.
        self.limiters
            .iter()
            .map(|l| l.when(item))
            .max()
            .unwrap_or_default()
    }

    fn forget(&self, item: &T) {
        self.limiters.iter().for_each(|l| l.forget(item));
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.limiters
            .iter()
            .map(|l| l.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

/// client-go's `DefaultControllerRateLimiter`.
pub fn default_controller_rate_limiter<T: Clone + Eq + Hash + Send + Sync + 'static>(
) -> MaxOfRateLimiter<T> {
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        )),
        Box::new(BucketRateLimiter::new(10.0, 100)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_item_backoff_doubles_to_the_cap_and_forget_resets_it() {
        let limiter = ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        );
        let delays: Vec<_> = (0..4).map(|_| limiter.when(&"a")).collect();
        assert_eq!(delays, [5, 10, 20, 40].map(Duration::from_millis).to_vec());
        assert_eq!(limiter.when(&"b"), Duration::from_millis(5));
        assert_eq!(limiter.num_requeues(&"a"), 4);
        for _ in 0..40 {
            limiter.when(&"a");
        }
        assert_eq!(limiter.when(&"a"), Duration::from_secs(1000));
        limiter.forget(&"a");
        assert_eq!(limiter.num_requeues(&"a"), 0);
        assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
    }

    #[tokio::test(start_paused = true)]
    async fn the_default_limiter_holds_a_storm_to_ten_per_second() {
        let limiter = default_controller_rate_limiter::<u32>();
        // 100 distinct keys fail once: the burst covers them.
        for key in 0..100 {
            assert_eq!(limiter.when(&key), Duration::from_millis(5));
        }
        // The 101st waits for the bucket, not for its own 5 ms.
        assert_eq!(limiter.when(&100), Duration::from_millis(100));
    }
}
