//! Time as the queue sees it: real, or driven by a test.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

pub trait Clock: Send + Sync {
    fn now(&self) -> Instant;
}

pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that moves only when told.
#[derive(Clone)]
pub struct FakeClock(Arc<Mutex<Instant>>);

impl FakeClock {
    pub fn new() -> FakeClock {
        FakeClock(Arc::new(Mutex::new(Instant::now())))
    }

    pub fn advance(&self, by: Duration) {
        *self.0.lock() += by;
    }
}

impl Default for FakeClock {
    fn default() -> Self {
        FakeClock::new()
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        *self.0.lock()
    }
}
