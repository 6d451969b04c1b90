//! A token bucket with reservations, the shape of Go's `rate.Limiter`
//! that client-go builds on: a caller takes a token now and is told how
//! long to wait before using it, so a work queue can schedule a retry
//! without blocking and a rate-limited request can sleep outside any
//! lock. (The rate-limiting crates answer "allowed or not" and cannot
//! hand out future tokens, which the work queue's limiter needs.)

use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// `qps` tokens a second, at most `burst` saved up. Uses tokio's clock,
/// so tests with paused time control it.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<BucketState>,
}

#[derive(Debug)]
struct BucketState {
    /// Tokens at `at`; negative once reservations run ahead of refill.
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    /// A full bucket. `qps <= 0` means unlimited: every reservation is
    /// immediate.
    pub fn new(qps: f64, burst: u32) -> TokenBucket {
        TokenBucket {
            qps,
            burst: f64::from(burst.max(1)),
            state: Mutex::new(BucketState {
                tokens: f64::from(burst.max(1)),
                at: Instant::now(),
            }),
        }
    }

    /// Whether the bucket limits anything.
    pub fn is_unlimited(&self) -> bool {
        self.qps <= 0.0
    }

    /// Takes one token and returns how long to wait before acting on it
    /// (zero when one was saved up).
    pub fn reserve(&self) -> Duration {
        if self.is_unlimited() {
            return Duration::ZERO;
        }
        let now = Instant::now();
        let mut state = self.state.lock();
        let elapsed = now.saturating_duration_since(state.at).as_secs_f64();
        state.tokens = (state.tokens + elapsed * self.qps).min(self.burst);
        state.at = now;
        state.tokens -= 1.0;
        if state.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-state.tokens / self.qps)
        }
    }

    /// Takes a token only if one is there now (a spam filter's question).
    pub fn try_take(&self) -> bool {
        if self.is_unlimited() {
            return true;
        }
        let now = Instant::now();
        let mut state = self.state.lock();
        let elapsed = now.saturating_duration_since(state.at).as_secs_f64();
        state.tokens = (state.tokens + elapsed * self.qps).min(self.burst);
        state.at = now;
        if state.tokens >= 1.0 {
            state.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Waits for a token.
    pub async fn acquire(&self) {
        let wait = self.reserve();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_is_free_then_tokens_come_at_the_rate() {
        let bucket = TokenBucket::new(10.0, 3);
        for _ in 0..3 {
            assert_eq!(bucket.reserve(), Duration::ZERO);
        }
        assert_eq!(bucket.reserve(), Duration::from_millis(100));
        assert_eq!(bucket.reserve(), Duration::from_millis(200));
        tokio::time::advance(Duration::from_millis(200)).await;
        // Two tokens came; both were already promised.
        assert_eq!(bucket.reserve(), Duration::from_millis(100));
    }

    #[tokio::test(start_paused = true)]
    async fn saved_tokens_never_exceed_the_burst() {
        let bucket = TokenBucket::new(1.0, 2);
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(bucket.try_take());
        assert!(bucket.try_take());
        assert!(!bucket.try_take());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(bucket.try_take());
    }

    #[tokio::test(start_paused = true)]
    async fn zero_qps_is_unlimited() {
        let bucket = TokenBucket::new(0.0, 1);
        for _ in 0..1000 {
            assert_eq!(bucket.reserve(), Duration::ZERO);
        }
    }
}
