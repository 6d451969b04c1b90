//! The Retry-After a rejection suggests, per priority level: one second
//! while rejections are rare, doubling (up to 32 s) while a level keeps
//! rejecting at least three requests a second of its current value, and
//! coming down a second at a time once they subside, as a TCP sender
//! backs off and recovers.

use std::collections::{HashMap, VecDeque};

const MAX_RETRY_AFTER: u64 = 32;

#[derive(Debug, Default)]
pub struct RetryAfter {
    levels: HashMap<String, Level>,
}

#[derive(Debug)]
struct Level {
    /// Rejections per second, for the seconds before `second`.
    history: VecDeque<(u64, u64)>,
    second: u64,
    count: u64,
    retry_after: u64,
    raised_at: u64,
}

impl RetryAfter {
    /// Notes a rejection at `level` during `second`; returns the
    /// Retry-After to send with it.
    pub fn reject(&mut self, level: &str, second: u64) -> u64 {
        if !self.levels.contains_key(level) {
            self.levels.insert(level.to_string(), Level::new(second));
        }
        let stats = self.levels.get_mut(level).expect("inserted above");
        stats.record(second);
        stats.retry_after
    }

    /// Forgets levels that no longer exist.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.levels.retain(|name, _| keep(name));
    }
}

impl Level {
    fn new(second: u64) -> Level {
        Level {
            history: VecDeque::new(),
            second,
            count: 0,
            retry_after: 1,
            raised_at: 0,
        }
    }

    fn record(&mut self, second: u64) {
        if second == self.second {
            self.count += 1;
            return;
        }
        self.history.push_back((self.second, self.count));
        while self
            .history
            .front()
            .is_some_and(|(s, _)| second - s > MAX_RETRY_AFTER)
        {
            self.history.pop_front();
        }
        self.second = second;
        self.count = 1;
        self.adjust(second);
    }

    /// Reconsiders the value from the rejections of the last
    /// `retry_after` seconds before `now`.
    fn adjust(&mut self, now: u64) {
        let window = self.retry_after;
        let recent: u64 = self
            .history
            .iter()
            .filter(|(s, _)| *s < now && now - s <= window)
            .map(|(_, n)| n)
            .sum();
        if now - self.raised_at >= window && recent >= 3 * window {
            self.retry_after = (window * 2).min(MAX_RETRY_AFTER);
            self.raised_at = now;
        } else if recent < window && window > 1 {
            self.retry_after -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sustained_rejections_back_off_and_recover() {
        let mut retry = RetryAfter::default();
        assert_eq!(retry.reject("a", 100), 1);
        for _ in 0..10 {
            retry.reject("a", 100);
        }
        // The next second sees 11 rejections in the last one: double.
        assert_eq!(retry.reject("a", 101), 2);
        // Another level is not affected.
        assert_eq!(retry.reject("b", 101), 1);
        let mut second = 101;
        let mut value = 2;
        for _ in 0..40 {
            for _ in 0..200 {
                retry.reject("a", second);
            }
            second += 1;
            value = retry.reject("a", second);
        }
        assert_eq!(value, MAX_RETRY_AFTER);
        // Quiet seconds bring it down one at a time.
        second += 60;
        assert_eq!(retry.reject("a", second), MAX_RETRY_AFTER - 1);
        assert_eq!(retry.reject("a", second + 1), MAX_RETRY_AFTER - 2);
        retry.retain(|name| name == "b");
        assert_eq!(retry.reject("a", second + 2), 1);
    }
}
