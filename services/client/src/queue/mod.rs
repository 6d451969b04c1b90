//! client-go's work queue: the hand-off between event handlers (which
//! add keys) and a controller's workers (which process them).
//!
//! - A key added many times before a worker takes it is processed once.
//! - A key being processed is never handed to a second worker; added
//!   again meanwhile, it is processed once more after [`WorkQueue::done`].
//! - [`WorkQueue::add_after`] delays a key; [`WorkQueue::add_rate_limited`]
//!   delays it by the queue's [`RateLimiter`] (per-key exponential backoff
//!   and an overall bucket by default); [`WorkQueue::forget`] resets it.
//! - [`WorkQueue::shutdown`] stops new adds; workers drain what is queued,
//!   then [`WorkQueue::get`] returns `None`.
//!
//! [`run_workers`] runs N workers over a queue with retries and panic
//! isolation. Metrics carry client-go's names with the queue's `name`.

mod metrics;
mod rate_limiter;
mod state;
mod workers;

use std::hash::Hash;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

pub use rate_limiter::{
    default_controller_rate_limiter, BucketRateLimiter, ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter, RateLimiter,
};
pub use workers::run_workers;

use metrics::QueueMetrics;
use state::{Added, State};

/// How often the in-progress gauges are refreshed (client-go's period).
const GAUGE_PERIOD: Duration = Duration::from_millis(500);

/// A deduplicating, rate-limited, delaying work queue of keys `T`
/// (typically `namespace/name` strings or `kube::runtime::reflector::ObjectRef`s).
/// Clones share the queue.
pub struct WorkQueue<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Clone for WorkQueue<T> {
    fn clone(&self) -> Self {
        WorkQueue {
            inner: self.inner.clone(),
        }
    }
}

struct Inner<T> {
    name: String,
    state: Mutex<State<T>>,
    /// Wakes workers waiting in `get`.
    ready: Notify,
    /// Wakes the delay task when an earlier key is scheduled or on shutdown.
    delays: Arc<Notify>,
    limiter: Box<dyn RateLimiter<T>>,
    metrics: QueueMetrics,
}

impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        // Lets the delay task see the queue is gone and end.
        self.delays.notify_one();
    }
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> WorkQueue<T> {
    /// A queue with the default controller rate limiter. `name` labels its
    /// metrics and logs (one per controller, e.g. `deployment`). Must be
    /// called inside a tokio runtime (it starts the delay timer).
    pub fn new(name: &str) -> WorkQueue<T> {
        WorkQueue::with_rate_limiter(name, default_controller_rate_limiter())
    }

    /// A queue with its own rate limiter.
    pub fn with_rate_limiter(name: &str, limiter: impl RateLimiter<T>) -> WorkQueue<T> {
        let delays = Arc::new(Notify::new());
        let inner = Arc::new(Inner {
            name: name.to_string(),
            state: Mutex::new(State::new()),
            ready: Notify::new(),
            delays: delays.clone(),
            limiter: Box::new(limiter),
            metrics: QueueMetrics::new(name),
        });
        tokio::spawn(delay_loop(Arc::downgrade(&inner), delays));
        WorkQueue { inner }
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Marks `item` to be processed (ignored after shutdown).
    pub fn add(&self, item: T) {
        let mut state = self.inner.state.lock();
        if state.shutting_down {
            return;
        }
        if state.add(item, Instant::now()) == Added::Queued {
            self.inner.metrics.added(state.len());
            drop(state);
            self.inner.ready.notify_one();
        }
    }

    /// Adds `item` once `delay` has passed (at once if it is zero). A key
    /// already waiting keeps the earlier of its two times.
    pub fn add_after(&self, item: T, delay: Duration) {
        if delay.is_zero() {
            return self.add(item);
        }
        let mut state = self.inner.state.lock();
        if state.shutting_down {
            return;
        }
        if state.add_at(item, Instant::now() + delay) {
            drop(state);
            self.inner.delays.notify_one();
        }
    }

    /// Adds `item` after the delay the rate limiter gives it (a retry).
    pub fn add_rate_limited(&self, item: T) {
        let delay = self.inner.limiter.when(&item);
        self.inner.metrics.retried();
        self.add_after(item, delay);
    }

    /// Forgets `item`'s retries (call after it was processed successfully).
    pub fn forget(&self, item: &T) {
        self.inner.limiter.forget(item);
    }

    /// How many times `item` was retried since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.inner.limiter.num_requeues(item)
    }

    /// The next key to process; `None` once the queue is shut down and
    /// drained. Call [`WorkQueue::done`] with it when finished.
    pub async fn get(&self) -> Option<T> {
        loop {
            let notified = self.inner.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.inner.state.lock();
                if let Some((item, waited)) = state.take(Instant::now()) {
                    self.inner.metrics.taken(state.len(), waited);
                    let more = state.len() > 0;
                    drop(state);
                    if more {
                        // Our wake-up may have been meant for the next key.
                        self.inner.ready.notify_one();
                    }
                    return Some(item);
                }
                if state.shutting_down {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// Ends the processing of `item`; if it was added meanwhile, it is
    /// queued again.
    pub fn done(&self, item: &T) {
        let mut state = self.inner.state.lock();
        let (worked, requeued) = state.done(item, Instant::now());
        if let Some(worked) = worked {
            self.inner.metrics.done(worked);
        }
        if requeued {
            self.inner.metrics.added(state.len());
            drop(state);
            self.inner.ready.notify_one();
        }
    }

    /// Keys ready to be handed out (not counting delayed or in-process ones).
    pub fn len(&self) -> usize {
        self.inner.state.lock().len()
    }

    /// Whether no key is ready.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops accepting keys; workers finish what is queued, then `get`
    /// returns `None`. Delayed keys are dropped.
    pub fn shutdown(&self) {
        self.inner.state.lock().shutting_down = true;
        self.inner.ready.notify_waiters();
        self.inner.delays.notify_one();
    }

    /// Whether [`WorkQueue::shutdown`] was called.
    pub fn is_shutting_down(&self) -> bool {
        self.inner.state.lock().shutting_down
    }
}

/// Moves delayed keys into the queue when due and refreshes the
/// in-progress gauges; ends when the queue is shut down or dropped.
async fn delay_loop<T: Clone + Eq + Hash + Send + Sync + 'static>(
    queue: Weak<Inner<T>>,
    wake: Arc<Notify>,
) {
    loop {
        let notified = wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let next = {
            let Some(inner) = queue.upgrade() else { return };
            let now = Instant::now();
            let mut state = inner.state.lock();
            if state.shutting_down {
                return;
            }
            let queued = state.release_due(now);
            let (unfinished, longest) = state.in_progress(now);
            inner.metrics.in_progress(unfinished, longest);
            if queued > 0 {
                inner.metrics.added(state.len());
            }
            let next = state.next_due();
            drop(state);
            for _ in 0..queued {
                inner.ready.notify_one();
            }
            next.map_or(now + GAUGE_PERIOD, |due| due.min(now + GAUGE_PERIOD))
        };
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = &mut notified => {}
        }
    }
}

#[cfg(test)]
mod tests;
