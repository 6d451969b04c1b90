//! What a request gets from the engine: leave to run (held until it is
//! done, or for a watch until it has started), or a rejection carrying
//! what a 429 needs. Both name the flow schema and priority level, whose
//! UIDs the response reports.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::demand::DemandStats;
use super::metrics::{FlowControlMetrics, FlowLabels, RejectLabels};
use super::queueset::{Grant, QueueSet, RejectReason, Ticket};

/// kube's body for a request turned away.
pub const TOO_MANY_REQUESTS: &str = "Too many requests, please try again later.";

/// A flow schema or priority level as responses name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    /// None for a mandatory object the server supplies while it is
    /// missing from the API.
    pub uid: Option<String>,
}

/// A priority level's live state; shared by the configuration and by the
/// requests it is serving, so it outlives a reconfiguration.
#[derive(Debug)]
pub struct Level {
    pub name: String,
    pub queues: Mutex<QueueSet>,
    pub demand: Mutex<DemandStats>,
}

impl Level {
    pub fn new(name: &str, queues: QueueSet) -> Level {
        Level {
            name: name.to_string(),
            queues: Mutex::new(queues),
            demand: Mutex::new(DemandStats::default()),
        }
    }
}

/// Leave to run. Dropping it frees the seats.
#[derive(Debug)]
pub struct Admitted {
    pub flow_schema: Identity,
    pub priority_level: Identity,
    pub seats: u32,
    running: Option<Running>,
}

impl Admitted {
    pub(super) fn new(
        flow_schema: Identity,
        priority_level: Identity,
        running: Running,
    ) -> Admitted {
        let seats = running.grant.seats;
        Admitted {
            flow_schema,
            priority_level,
            seats,
            running: Some(running),
        }
    }

    /// Frees the seats now: a watch has started and no longer needs them.
    pub fn release(mut self) {
        self.running.take();
    }
}

/// Seats held by a running request.
#[derive(Debug)]
pub(super) struct Running {
    pub level: Arc<Level>,
    pub grant: Grant,
    pub labels: FlowLabels,
    pub metrics: FlowControlMetrics,
}

impl Running {
    pub fn start(
        level: Arc<Level>,
        grant: Grant,
        labels: FlowLabels,
        metrics: FlowControlMetrics,
    ) -> Running {
        metrics.executing_requests.get_or_create(&labels).inc();
        metrics
            .executing_seats
            .get_or_create(&labels)
            .inc_by(grant.seats as i64);
        metrics.dispatched.get_or_create(&labels).inc();
        Running {
            level,
            grant,
            labels,
            metrics,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.level.queues.lock().finish(Instant::now(), self.grant);
        self.metrics
            .executing_requests
            .get_or_create(&self.labels)
            .dec();
        self.metrics
            .executing_seats
            .get_or_create(&self.labels)
            .dec_by(self.grant.seats as i64);
    }
}

/// Turned away: answer 429 with `Retry-After: retry_after`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub flow_schema: Identity,
    pub priority_level: Identity,
    pub reason: RejectReason,
    /// Seconds.
    pub retry_after: u64,
}

/// A request's place in a queue. If the request goes away (its client
/// disconnected and its future was dropped) the place is given up, or
/// the seats it was just granted are given back.
pub(super) struct Waiting {
    pub level: Arc<Level>,
    pub ticket: Option<Ticket>,
    pub labels: FlowLabels,
    pub seats: u32,
    pub metrics: FlowControlMetrics,
}

impl Waiting {
    pub fn enter(
        level: Arc<Level>,
        ticket: Ticket,
        labels: FlowLabels,
        seats: u32,
        metrics: FlowControlMetrics,
    ) -> Waiting {
        metrics.inqueue_requests.get_or_create(&labels).inc();
        metrics
            .inqueue_seats
            .get_or_create(&labels)
            .inc_by(seats as i64);
        Waiting {
            level,
            ticket: Some(ticket),
            labels,
            seats,
            metrics,
        }
    }

    /// Waits for the grant until `deadline`; None when the request is
    /// still queued then (and is taken out).
    pub async fn until(mut self, deadline: Instant) -> Option<Grant> {
        let ticket = self.ticket.as_mut().expect("waited once");
        let granted = tokio::time::timeout_at(deadline, &mut ticket.grant).await;
        let ticket = self.ticket.take().expect("waited once");
        match granted {
            Ok(Ok(grant)) => Some(grant),
            // The sender went away without a grant: treat as timed out.
            Ok(Err(_)) => None,
            Err(_) => self.give_up(ticket),
        }
    }

    /// Takes the request out of its queue, unless it was granted seats
    /// in the meantime: then it keeps them.
    fn give_up(&self, mut ticket: Ticket) -> Option<Grant> {
        let mut queues = self.level.queues.lock();
        if queues.cancel(Instant::now(), &ticket) {
            return None;
        }
        ticket.grant.try_recv().ok()
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.metrics
            .inqueue_requests
            .get_or_create(&self.labels)
            .dec();
        self.metrics
            .inqueue_seats
            .get_or_create(&self.labels)
            .dec_by(self.seats as i64);
        let Some(mut ticket) = self.ticket.take() else {
            return;
        };
        // Dropped while waiting: the client went away.
        let now = Instant::now();
        let mut queues = self.level.queues.lock();
        if queues.cancel(now, &ticket) {
            let labels = RejectLabels {
                priority_level: self.labels.priority_level.clone(),
                flow_schema: self.labels.flow_schema.clone(),
                reason: "cancelled",
            };
            self.metrics.rejected.get_or_create(&labels).inc();
        } else if let Ok(grant) = ticket.grant.try_recv() {
            queues.finish(now, grant);
        }
    }
}
