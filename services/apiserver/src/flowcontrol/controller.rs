//! The engine: the digested configuration, a live state per priority
//! level, and the three things the server does with them: admit a
//! request, take a new configuration, and re-divide the seats among the
//! levels every ten seconds.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use parking_lot::{Mutex, RwLock};
use tokio::time::Instant;

pub use super::admission::{Admitted, Identity, Rejected, TOO_MANY_REQUESTS};
use super::admission::{Level, Running, Waiting};
use super::bootstrap::CATCH_ALL;
use super::classify::{classify, flow_distinguisher};
use super::config::{digest, LevelSpec, SchemaSpec, SchemaStatus};
use super::dealer::Dealer;
use super::digest::{ListShape, RequestDigest};
use super::estimate;
use super::limits::{divide, Claim, Limits};
use super::metrics::{FlowControlMetrics, FlowLabels, RejectLabels, WaitLabels};
use super::queueset::{Mode, QueueSet, RejectReason, Start};
use super::retry_after::RetryAfter;

/// How often the seats are re-divided by demand.
pub const ADJUSTMENT_PERIOD: Duration = Duration::from_secs(10);
/// How long a request may wait in a queue: kube's quarter of the 60 s
/// request timeout.
pub const DEFAULT_WAIT_LIMIT: Duration = Duration::from_secs(15);

/// A level as configured.
#[derive(Debug, Clone)]
struct LevelEntry {
    spec: LevelSpec,
    limits: Limits,
    level: Arc<Level>,
    /// Removed from the configuration; kept until its requests are done.
    draining: bool,
}

#[derive(Debug, Default)]
struct State {
    schemas: Vec<SchemaSpec>,
    levels: HashMap<String, LevelEntry>,
    /// What the levels' nominal limits add up to: the seats to divide.
    nominal_sum: u32,
}

pub struct FlowControl {
    server_limit: u32,
    wait_limit: Duration,
    state: RwLock<Arc<State>>,
    /// Serialises reconfiguration and limit adjustment.
    changing: Mutex<()>,
    metrics: FlowControlMetrics,
    retry: Mutex<RetryAfter>,
    hasher: RandomState,
    epoch: Instant,
}

impl FlowControl {
    /// An engine sharing `server_limit` seats, with only the mandatory
    /// levels until [`FlowControl::configure`] is given the objects.
    pub fn new(
        server_limit: u32,
        wait_limit: Duration,
        metrics: FlowControlMetrics,
    ) -> FlowControl {
        let engine = FlowControl {
            server_limit: server_limit.max(1),
            wait_limit,
            state: RwLock::new(Arc::default()),
            changing: Mutex::new(()),
            metrics,
            retry: Mutex::new(RetryAfter::default()),
            hasher: RandomState::new(),
            epoch: Instant::now(),
        };
        engine.configure(&[], &[]);
        engine
    }

    pub fn metrics(&self) -> &FlowControlMetrics {
        &self.metrics
    }

    /// Takes the current objects as the configuration; returns each
    /// schema's Dangling status to publish.
    pub fn configure(
        &self,
        levels: &[PriorityLevelConfiguration],
        schemas: &[FlowSchema],
    ) -> Vec<SchemaStatus> {
        let _changing = self.changing.lock();
        let now = Instant::now();
        let digested = digest(levels, schemas);
        let old = self.state.read().clone();
        let planned = plan_levels(&old, digested.levels);
        let share_sum = planned.iter().map(|(spec, _, _)| spec.shares).sum();
        let mut state = State {
            schemas: digested.schemas,
            ..State::default()
        };
        for (spec, live, draining) in planned {
            let limits = Limits::new(
                self.server_limit,
                spec.shares,
                share_sum,
                spec.lendable_percent,
                spec.borrowing_limit_percent,
                spec.queuing.map(|q| q.hand_size),
            );
            let mode = mode_of(&spec);
            let level = match live {
                Some(level) => {
                    level.queues.lock().set_mode(now, mode);
                    level
                }
                None => Arc::new(Level::new(
                    &spec.name,
                    QueueSet::new(mode, limits.initial(), now),
                )),
            };
            self.note_limits(&spec.name, &limits);
            state.nominal_sum += limits.nominal;
            let entry = LevelEntry {
                spec,
                limits,
                level,
                draining,
            };
            state.levels.insert(entry.spec.name.clone(), entry);
        }
        self.retry
            .lock()
            .retain(|name| state.levels.contains_key(name));
        let state = Arc::new(state);
        *self.state.write() = state.clone();
        self.divide_seats(&state, now);
        digested.statuses
    }

    /// Re-divides the seats by the demand since the last division, and
    /// drops drained levels. Run every [`ADJUSTMENT_PERIOD`].
    pub fn adjust_limits(&self) {
        let _changing = self.changing.lock();
        let now = Instant::now();
        let mut state = self.state.read().clone();
        let drained = state
            .levels
            .values()
            .any(|e| e.draining && e.level.queues.lock().is_idle());
        if drained {
            let mut levels = state.levels.clone();
            levels.retain(|_, e| !(e.draining && e.level.queues.lock().is_idle()));
            let nominal_sum = levels.values().map(|e| e.limits.nominal).sum();
            state = Arc::new(State {
                schemas: state.schemas.clone(),
                levels,
                nominal_sum,
            });
            *self.state.write() = state.clone();
        }
        self.divide_seats(&state, now);
    }

    /// Adjusts the limits every [`ADJUSTMENT_PERIOD`], forever.
    pub async fn adjust_periodically(&self) {
        let mut ticks = tokio::time::interval(ADJUSTMENT_PERIOD);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            self.adjust_limits();
        }
    }

    /// Each level gets at least its lower limit (or its recent peak, if
    /// less than nominal), at most its upper one, and otherwise seats in
    /// proportion to its smoothed demand.
    fn divide_seats(&self, state: &State, now: Instant) {
        let entries: Vec<&LevelEntry> = state.levels.values().collect();
        let claims: Vec<Claim> = entries
            .iter()
            .map(|entry| {
                let period = entry.level.queues.lock().take_demand(now);
                let mut demand = entry.level.demand.lock();
                demand.update(period);
                let limits = entry.limits;
                let lower =
                    (limits.lower as f64).max((limits.nominal as f64).min(demand.high_watermark));
                let label = self.metrics.level(&entry.spec.name);
                self.metrics
                    .demand_high_watermark
                    .get_or_create(&label)
                    .set(demand.high_watermark);
                self.metrics
                    .demand_smoothed
                    .get_or_create(&label)
                    .set(demand.smoothed);
                Claim {
                    lower,
                    upper: limits.upper as f64,
                    target: lower.max(demand.smoothed),
                }
            })
            .collect();
        let (seats, fair) = divide(state.nominal_sum, &claims);
        self.metrics
            .fair_fraction
            .set(if fair.is_finite() { fair } else { 0.0 });
        for ((entry, claim), seats) in entries.iter().zip(&claims).zip(seats) {
            let limit = seats.round() as u32;
            let mut queues = entry.level.queues.lock();
            queues.set_limit(now, limit);
            let label = self.metrics.level(&entry.spec.name);
            self.metrics
                .current_limit
                .get_or_create(&label)
                .set(limit as i64);
            self.metrics
                .target_seats
                .get_or_create(&label)
                .set(claim.target);
            self.metrics
                .current_r
                .get_or_create(&label)
                .set(queues.virtual_time());
        }
    }

    fn note_limits(&self, name: &str, limits: &Limits) {
        let label = self.metrics.level(name);
        self.metrics
            .nominal_limit
            .get_or_create(&label)
            .set(limits.nominal as i64);
        self.metrics
            .lower_limit
            .get_or_create(&label)
            .set(limits.lower as i64);
        self.metrics
            .upper_limit
            .get_or_create(&label)
            .set(limits.upper as i64);
    }

    /// Classifies the request and lets it run now, after waiting its
    /// turn, or not at all. `shape` is what its cost depends on.
    pub async fn admit(
        &self,
        request: &RequestDigest,
        shape: &ListShape,
    ) -> Result<Admitted, Rejected> {
        let state = self.state.read().clone();
        let (schema, entry) = route(&state, request);
        let flow_schema = Identity {
            name: schema.name.clone(),
            uid: schema.uid.clone(),
        };
        let priority_level = Identity {
            name: entry.spec.name.clone(),
            uid: entry.spec.uid.clone(),
        };
        let labels = self.metrics.flow(&entry.spec.name, &schema.name);
        let seats = match entry.spec.exempt {
            true => 1,
            false => estimate::seats(request, shape, entry.limits.max_seats),
        };
        self.metrics
            .estimated_seats
            .get_or_create(&labels)
            .observe(seats as f64);
        let hash = self
            .hasher
            .hash_one((&schema.name, flow_distinguisher(schema, request)));
        let arrived = Instant::now();
        let level = entry.level.clone();
        let start = level.queues.lock().start(arrived, hash, seats);
        let grant = match start {
            Start::Run(grant) => Some(grant),
            Start::Rejected(reason) => {
                return Err(self.reject(flow_schema, priority_level, reason, &labels));
            }
            Start::Wait(ticket) => {
                let metrics = self.metrics.clone();
                let waiting = Waiting::enter(level.clone(), ticket, labels.clone(), seats, metrics);
                waiting.until(arrived + self.wait_limit).await
            }
        };
        self.observe_wait(&labels, arrived, grant.is_some());
        match grant {
            Some(grant) => {
                let running = Running::start(level, grant, labels, self.metrics.clone());
                Ok(Admitted::new(flow_schema, priority_level, running))
            }
            None => Err(self.reject(flow_schema, priority_level, RejectReason::TimeOut, &labels)),
        }
    }

    fn observe_wait(&self, labels: &FlowLabels, arrived: Instant, executes: bool) {
        let labels = WaitLabels {
            priority_level: labels.priority_level.clone(),
            flow_schema: labels.flow_schema.clone(),
            execute: if executes { "true" } else { "false" },
        };
        self.metrics
            .wait
            .get_or_create(&labels)
            .observe(arrived.elapsed().as_secs_f64());
    }

    fn reject(
        &self,
        flow_schema: Identity,
        priority_level: Identity,
        reason: RejectReason,
        labels: &FlowLabels,
    ) -> Rejected {
        let second = self.epoch.elapsed().as_secs();
        let retry_after = self.retry.lock().reject(&priority_level.name, second);
        let reject_labels = RejectLabels {
            priority_level: labels.priority_level.clone(),
            flow_schema: labels.flow_schema.clone(),
            reason: reason.label(),
        };
        self.metrics.rejected.get_or_create(&reject_labels).inc();
        tracing::debug!(flow_schema = %flow_schema.name, priority_level = %priority_level.name, reason = reason.label(), "request rejected by flow control");
        Rejected {
            flow_schema,
            priority_level,
            reason,
            retry_after,
        }
    }

    /// The current concurrency limit of `level`, if it exists.
    pub fn current_limit(&self, level: &str) -> Option<u32> {
        let state = self.state.read().clone();
        state
            .levels
            .get(level)
            .map(|e| e.level.queues.lock().limit())
    }

    /// The nominal, lower and upper limits of `level`, if it exists.
    pub fn limits(&self, level: &str) -> Option<Limits> {
        self.state.read().levels.get(level).map(|e| e.limits)
    }
}

/// The schema a request falls under (the catch-all when none matches,
/// as for a user in no group) and its level.
fn route<'a>(state: &'a State, request: &RequestDigest) -> (&'a SchemaSpec, &'a LevelEntry) {
    let schema = classify(&state.schemas, request)
        .or_else(|| state.schemas.iter().find(|s| s.name == CATCH_ALL))
        .expect("the catch-all schema is always configured");
    (schema, &state.levels[&schema.level])
}

/// The new configuration's levels, each with its live state if it
/// already had one, then the removed levels still serving requests,
/// marked as draining.
fn plan_levels(old: &State, specs: Vec<LevelSpec>) -> Vec<(LevelSpec, Option<Arc<Level>>, bool)> {
    let mut planned: Vec<_> = specs
        .into_iter()
        .map(|spec| {
            let live = old.levels.get(&spec.name).map(|e| e.level.clone());
            (spec, live, false)
        })
        .collect();
    for (name, entry) in &old.levels {
        let kept = planned.iter().any(|(spec, _, _)| spec.name == *name);
        if !kept && !entry.level.queues.lock().is_idle() {
            planned.push((entry.spec.clone(), Some(entry.level.clone()), true));
        }
    }
    planned
}

fn mode_of(spec: &LevelSpec) -> Mode {
    if spec.exempt {
        return Mode::Exempt;
    }
    match spec.queuing {
        Some(q) => match Dealer::new(q.queues, q.hand_size) {
            Ok(dealer) => Mode::Queue(q, dealer),
            // The digest already left out levels whose hands cannot be
            // dealt.
            Err(_) => Mode::Reject,
        },
        None => Mode::Reject,
    }
}

#[cfg(test)]
mod tests;
