//! A priority level's queues: fair queuing for server requests. Each
//! flow is shuffle-sharded onto the least loaded queue of its hand; a
//! request runs when seats are free, taken from the queue whose oldest
//! request would finish first in virtual time (R, the seat-seconds each
//! active queue has been entitled to so far). A request's work is its
//! seats times an estimated service time, corrected by the actual time
//! once it finishes, so queues of slow requests get fewer turns.

mod grant;
mod queue;

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

pub use self::grant::Grant;
use self::queue::{Queue, Waiting};
use super::config::Queuing;
use super::dealer::Dealer;
use super::demand::{Integrator, Period};

/// The service time virtual time assumes until the real one is known.
const ESTIMATED_SERVICE: Duration = Duration::from_millis(3);

/// How a level treats what it cannot run at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Runs everything at once (the exempt level); still counted.
    Exempt,
    /// Rejects what does not fit.
    Reject,
    Queue(Queuing, Dealer),
}

/// Why a request was not let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectReason {
    QueueFull,
    ConcurrencyLimit,
    TimeOut,
}

impl RejectReason {
    /// kube's `reason` label.
    pub fn label(&self) -> &'static str {
        match self {
            RejectReason::QueueFull => "queue-full",
            RejectReason::ConcurrencyLimit => "concurrency-limit",
            RejectReason::TimeOut => "time-out",
        }
    }
}

/// What became of a request on arrival.
#[derive(Debug)]
pub enum Start {
    Run(Grant),
    Wait(Ticket),
    Rejected(RejectReason),
}

/// A place in a queue, and where the grant will arrive.
#[derive(Debug)]
pub struct Ticket {
    pub queue: u32,
    pub id: u64,
    pub grant: oneshot::Receiver<Grant>,
}

#[derive(Debug)]
pub struct QueueSet {
    mode: Mode,
    limit: u32,
    /// The queues that hold waiting or executing requests, by index.
    queues: BTreeMap<u32, Queue>,
    r: f64,
    synced: Instant,
    /// The queue last dispatched from; ties go to the next ones.
    robin: u32,
    enqueues: u64,
    next_id: u64,
    seats_in_use: u32,
    seats_waiting: u32,
    executing: u32,
    demand: Integrator,
}

impl QueueSet {
    pub fn new(mode: Mode, limit: u32, now: Instant) -> QueueSet {
        QueueSet {
            mode,
            limit,
            queues: BTreeMap::new(),
            r: 0.0,
            synced: now,
            robin: 0,
            enqueues: 0,
            next_id: 0,
            seats_in_use: 0,
            seats_waiting: 0,
            executing: 0,
            demand: Integrator::new(now),
        }
    }

    /// A request of `seats` from the flow hashed to `hash` arrives.
    pub fn start(&mut self, now: Instant, hash: u64, seats: u32) -> Start {
        self.sync(now);
        let (queuing, dealer) = match self.mode {
            Mode::Exempt => return Start::Run(self.run_unqueued(now, seats)),
            Mode::Reject if self.fits(seats) => return Start::Run(self.run_unqueued(now, seats)),
            Mode::Reject => return Start::Rejected(RejectReason::ConcurrencyLimit),
            Mode::Queue(queuing, dealer) => (queuing, dealer),
        };
        let index = self.shuffle_shard(&dealer, hash);
        let queue = self
            .queues
            .entry(index)
            .or_insert_with(|| Queue::starting_at(self.r));
        if self.seats_in_use >= self.limit
            && queue.waiting.len() >= queuing.queue_length_limit as usize
        {
            if queue.is_idle() {
                self.queues.remove(&index);
            }
            return Start::Rejected(RejectReason::QueueFull);
        }
        let (notify, grant) = oneshot::channel();
        let id = self.next_id;
        self.next_id += 1;
        let work = seats as f64 * ESTIMATED_SERVICE.as_secs_f64();
        queue.push(Waiting {
            id,
            seats,
            work,
            arrival_r: self.r,
            notify,
        });
        self.seats_waiting += seats;
        self.note_demand(now);
        self.dispatch(now);
        let mut ticket = Ticket {
            queue: index,
            id,
            grant,
        };
        match ticket.grant.try_recv() {
            Ok(grant) => Start::Run(grant),
            Err(_) => Start::Wait(ticket),
        }
    }

    /// A running request is done: its seats go to waiting ones.
    pub fn finish(&mut self, now: Instant, grant: Grant) {
        self.sync(now);
        self.executing -= 1;
        self.seats_in_use -= grant.seats;
        if let Some(index) = grant.queue {
            if let Some(queue) = self.queues.get_mut(&index) {
                queue.executing -= 1;
                queue.seats_in_use -= grant.seats;
                // Charge the queue for the time the request really took.
                let actual = now.saturating_duration_since(grant.started).as_secs_f64();
                queue.next_dispatch_r -=
                    grant.seats as f64 * (ESTIMATED_SERVICE.as_secs_f64() - actual);
                queue.bound_to_arrival();
                self.forget_if_idle(index);
            }
        }
        self.note_demand(now);
        self.dispatch(now);
    }

    /// Takes a waiting request out (it gave up or waited too long);
    /// false when it was dispatched in the meantime.
    pub fn cancel(&mut self, now: Instant, ticket: &Ticket) -> bool {
        self.sync(now);
        let Some(queue) = self.queues.get_mut(&ticket.queue) else {
            return false;
        };
        let Some(removed) = queue.remove(ticket.id) else {
            return false;
        };
        self.seats_waiting -= removed.seats;
        self.forget_if_idle(ticket.queue);
        self.note_demand(now);
        true
    }

    /// A new concurrency limit: run what now fits.
    pub fn set_limit(&mut self, now: Instant, limit: u32) {
        self.sync(now);
        self.limit = limit;
        self.dispatch(now);
    }

    /// A new configuration. Requests already queued stay where they are
    /// and drain; new ones follow the new mode.
    pub fn set_mode(&mut self, now: Instant, mode: Mode) {
        self.sync(now);
        self.mode = mode;
        self.dispatch(now);
    }

    /// The demand statistics of the period that ends now.
    pub fn take_demand(&mut self, now: Instant) -> Period {
        self.demand.reset(now)
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    pub fn is_idle(&self) -> bool {
        self.executing == 0 && self.queues.values().all(|q| q.waiting.is_empty())
    }

    /// Seats held by running requests.
    pub fn seats_in_use(&self) -> u32 {
        self.seats_in_use
    }

    /// Virtual time so far.
    pub fn virtual_time(&self) -> f64 {
        self.r
    }

    fn run_unqueued(&mut self, now: Instant, seats: u32) -> Grant {
        self.executing += 1;
        self.seats_in_use += seats;
        self.note_demand(now);
        Grant {
            queue: None,
            seats,
            started: now,
        }
    }

    /// Whether `seats` more fit under the limit. A request wider than the
    /// whole limit runs alone rather than never.
    fn fits(&self, seats: u32) -> bool {
        match self.mode {
            Mode::Exempt => true,
            _ if seats > self.limit => self.executing == 0,
            _ => self.seats_in_use + seats <= self.limit,
        }
    }

    /// The least loaded queue of the flow's hand; the starting card
    /// rotates so equal queues take turns.
    fn shuffle_shard(&mut self, dealer: &Dealer, hash: u64) -> u32 {
        let hand = dealer.deal(hash);
        let offset = (self.enqueues % hand.len() as u64) as usize;
        self.enqueues += 1;
        let load = |index: &u32| self.queues.get(index).map_or(0.0, |q| q.work_waiting);
        let mut best = hand[offset];
        for index in hand.iter().cycle().skip(offset).take(hand.len()) {
            if load(index) < load(&best) {
                best = *index;
            }
        }
        best
    }

    /// Runs waiting requests while seats allow.
    fn dispatch(&mut self, now: Instant) {
        while self.seats_waiting > 0 && (self.seats_in_use < self.limit || self.executing == 0) {
            let Some(index) = self.next_queue() else {
                return;
            };
            let queue = self
                .queues
                .get_mut(&index)
                .expect("chosen among the queues");
            let seats = queue.waiting.front().map_or(0, |w| w.seats);
            if !self.fits(seats) {
                return;
            }
            let queue = self
                .queues
                .get_mut(&index)
                .expect("chosen among the queues");
            let head = queue.pop().expect("chosen for its head");
            queue.next_dispatch_r += head.work;
            queue.executing += 1;
            queue.seats_in_use += head.seats;
            self.robin = index;
            self.seats_waiting -= head.seats;
            self.seats_in_use += head.seats;
            self.executing += 1;
            let grant = Grant {
                queue: Some(index),
                seats: head.seats,
                started: now,
            };
            if head.notify.send(grant).is_err() {
                // Nobody waits for it any more: it is done at once.
                self.finish(now, grant);
                return;
            }
        }
        self.note_demand(now);
    }

    /// The queue whose oldest request finishes first in virtual time,
    /// searching from the one after the last dispatched.
    fn next_queue(&self) -> Option<u32> {
        let after = self.queues.range(self.robin + 1..);
        let before = self.queues.range(..=self.robin);
        let mut best: Option<(f64, u32)> = None;
        for (index, queue) in after.chain(before) {
            if let Some(finish) = queue.head_finish() {
                if best.is_none_or(|(f, _)| finish < f) {
                    best = Some((finish, *index));
                }
            }
        }
        best.map(|(_, index)| index)
    }

    /// Advances virtual time: the seats in use (at most the limit) are
    /// shared by the active queues.
    fn sync(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.synced).as_secs_f64();
        self.synced = now;
        if self.queues.is_empty() {
            // Nothing refers to virtual time: start it over.
            self.r = 0.0;
            return;
        }
        let requested = (self.seats_in_use + self.seats_waiting).min(self.limit.max(1));
        self.r += elapsed * requested as f64 / self.queues.len() as f64;
    }

    fn forget_if_idle(&mut self, index: u32) {
        if self.queues.get(&index).is_some_and(Queue::is_idle) {
            self.queues.remove(&index);
        }
    }

    fn note_demand(&mut self, now: Instant) {
        self.demand
            .set(now, (self.seats_in_use + self.seats_waiting) as f64);
    }
}

#[cfg(test)]
mod tests;
