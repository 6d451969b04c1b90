//! One fair queue: its waiting requests in arrival order, the seats its
//! dispatched requests hold, and where it stands in virtual time.

use std::collections::VecDeque;

use tokio::sync::oneshot;

use super::grant::Grant;

/// A request waiting in a queue.
#[derive(Debug)]
pub struct Waiting {
    pub id: u64,
    pub seats: u32,
    /// Its estimated work in seat-seconds.
    pub work: f64,
    /// Virtual time when it arrived.
    pub arrival_r: f64,
    /// Told when the request may run.
    pub notify: oneshot::Sender<Grant>,
}

#[derive(Debug, Default)]
pub struct Queue {
    pub waiting: VecDeque<Waiting>,
    /// Virtual time at which its next request would start: it advances
    /// by each dispatched request's work.
    pub next_dispatch_r: f64,
    pub seats_in_use: u32,
    pub executing: u32,
    /// The work of the waiting requests, by which shuffle sharding picks
    /// the least loaded queue of a hand.
    pub work_waiting: f64,
}

impl Queue {
    pub fn starting_at(r: f64) -> Queue {
        Queue {
            next_dispatch_r: r,
            ..Queue::default()
        }
    }

    /// Neither waiting nor executing: its virtual time means nothing.
    pub fn is_idle(&self) -> bool {
        self.waiting.is_empty() && self.executing == 0
    }

    /// When the oldest waiting request would finish in virtual time.
    pub fn head_finish(&self) -> Option<f64> {
        self.waiting.front().map(|w| self.next_dispatch_r + w.work)
    }

    pub fn push(&mut self, waiting: Waiting) {
        self.work_waiting += waiting.work;
        self.waiting.push_back(waiting);
    }

    pub fn pop(&mut self) -> Option<Waiting> {
        let head = self.waiting.pop_front()?;
        self.took(&head);
        self.bound_to_arrival();
        Some(head)
    }

    /// Takes out the request `id` if it still waits here.
    pub fn remove(&mut self, id: u64) -> Option<Waiting> {
        let at = self.waiting.iter().position(|w| w.id == id)?;
        let removed = self.waiting.remove(at)?;
        self.took(&removed);
        if at == 0 {
            self.bound_to_arrival();
        }
        Some(removed)
    }

    fn took(&mut self, request: &Waiting) {
        self.work_waiting = if self.waiting.is_empty() {
            0.0
        } else {
            (self.work_waiting - request.work).max(0.0)
        };
    }

    /// A queue that could not use its share while it kept requests
    /// waiting would otherwise bank virtual time and later crowd out
    /// the others: dispatch never runs ahead of the oldest arrival.
    pub fn bound_to_arrival(&mut self) {
        if let Some(head) = self.waiting.front() {
            self.next_dispatch_r = self.next_dispatch_r.max(head.arrival_r);
        }
    }
}
