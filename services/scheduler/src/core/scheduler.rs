//! The scheduler: a thread running scheduling cycles one pod at a time
//! (snapshot, filter, score, assume), each pod's binding then running on the
//! async runtime while the next pod is scheduled (kube's binding cycle).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::algorithm::{Algorithm, Placement, ScheduleError};
use super::api::{EventType, PodRef, SchedulerApi, SchedulerEvent, StatusPatch};
use super::metrics::Metrics;
use super::profiles::Profiles;
use crate::cache::{Cache, DEFAULT_ASSUMED_POD_TTL};
use crate::config::{FieldError, SchedulerConfig};
use crate::framework::{
    ClusterLister, CycleState, FitError, Framework, NoNominatedPods, NominatedPods,
    PostFilterContext, PostFilterResult, Snapshot,
};
use crate::model::PodInfo;
use crate::queue::clock::{Clock, RealClock};
use crate::queue::{QueueSettings, QueuedPodInfo, SchedulingQueue};

/// How a failed attempt is reported.
struct Failure {
    message: String,
    /// PodScheduled's reason: Unschedulable, or SchedulerError.
    reason: &'static str,
    plugins: BTreeSet<&'static str>,
    errored: bool,
    post_filter: Option<PostFilterResult>,
}

pub struct Scheduler {
    pub(super) profiles: Arc<Profiles>,
    pub(super) cache: Arc<Mutex<Cache>>,
    pub(super) queue: Arc<SchedulingQueue>,
    api: Arc<dyn SchedulerApi>,
    pub metrics: Arc<Metrics>,
    runtime: tokio::runtime::Handle,
    bindings_in_flight: Arc<AtomicUsize>,
}

impl Scheduler {
    /// A scheduler for `config`'s profiles; bindings and other writes run on `runtime`.
    pub fn new(
        config: &SchedulerConfig,
        lister: Arc<dyn ClusterLister>,
        api: Arc<dyn SchedulerApi>,
        runtime: tokio::runtime::Handle,
    ) -> Result<Arc<Scheduler>, FieldError> {
        Scheduler::with_clock(config, lister, api, runtime, Arc::new(RealClock))
    }

    pub fn with_clock(
        config: &SchedulerConfig,
        lister: Arc<dyn ClusterLister>,
        api: Arc<dyn SchedulerApi>,
        runtime: tokio::runtime::Handle,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<Scheduler>, FieldError> {
        let profiles = Arc::new(Profiles::build(config, lister)?);
        let settings = QueueSettings {
            initial_backoff: config.pod_initial_backoff,
            max_backoff: config.pod_max_backoff,
            ..QueueSettings::default()
        };
        Ok(Arc::new(Scheduler {
            queue: Arc::new(SchedulingQueue::new(settings, profiles.clone(), clock)),
            profiles,
            cache: Arc::new(Mutex::new(Cache::new(DEFAULT_ASSUMED_POD_TTL))),
            api,
            metrics: Metrics::global(),
            runtime,
            bindings_in_flight: Arc::new(AtomicUsize::new(0)),
        }))
    }

    pub fn queue(&self) -> &Arc<SchedulingQueue> {
        &self.queue
    }

    pub fn profile_names(&self) -> Vec<String> {
        self.profiles.names()
    }

    /// Bindings sent and not yet answered.
    pub fn bindings_in_flight(&self) -> usize {
        self.bindings_in_flight.load(Ordering::Acquire)
    }

    /// Runs scheduling cycles on this thread until the queue is closed.
    pub fn run_cycles(self: &Arc<Self>) {
        let mut algorithm = Algorithm::default();
        let mut snapshot = Snapshot::default();
        while let Some(info) = self.queue.pop() {
            self.schedule_one(&mut algorithm, &mut snapshot, info);
            self.metrics.set_pending(self.queue.pending());
        }
    }

    /// Starts the scheduling thread; `stop` ends it.
    pub fn start(self: &Arc<Self>) -> std::thread::JoinHandle<()> {
        let scheduler = self.clone();
        std::thread::Builder::new()
            .name("scheduling-cycle".into())
            .spawn(move || scheduler.run_cycles())
            .expect("spawn the scheduling thread")
    }

    pub fn stop(&self) {
        self.queue.close();
    }

    /// Drops assumed pods whose binding the watch never confirmed; the
    /// wiring calls this every second or so.
    pub fn cleanup_assumed(&self) {
        let dropped = self.cache.lock().cleanup_expired(Instant::now());
        for pod in dropped {
            tracing::warn!(pod = %pod.full_name(), "assumed pod expired: its binding never showed in the watch");
        }
    }

    fn schedule_one(
        self: &Arc<Self>,
        algorithm: &mut Algorithm,
        snapshot: &mut Snapshot,
        info: QueuedPodInfo,
    ) {
        let pod = info.pod.clone();
        let Some(framework) = self.profiles.for_pod(&pod).cloned() else {
            self.queue.done(&pod.key);
            return;
        };
        if pod.is_terminating() || self.cache.lock().contains_pod(&pod.key) {
            self.queue.done(&pod.key);
            return;
        }
        let start = Instant::now();
        let span = tracing::debug_span!("scheduling_cycle", pod = %pod.full_name(), attempt = info.attempts);
        let _entered = span.enter();
        let mut state = CycleState::new();
        self.cache.lock().update_snapshot(snapshot);
        let nominations = self.queue.nominations();
        let nominated: &dyn NominatedPods = match &nominations {
            Some(view) => view,
            None => &NoNominatedPods,
        };
        let percentage = self.profiles.percentage(&framework);
        match algorithm.schedule(
            &framework, &mut state, &pod, snapshot, nominated, percentage,
        ) {
            Ok(placement) => self.assume_and_bind(framework, state, info, placement, start),
            Err(ScheduleError::Fit(mut fit)) => {
                let post_filter =
                    self.post_filter(&framework, &state, &pod, &mut fit, snapshot, nominated);
                let failure = Failure {
                    message: fit.to_string(),
                    reason: "Unschedulable",
                    plugins: fit.diagnosis.unschedulable_plugins.clone(),
                    errored: false,
                    post_filter,
                };
                self.fail(&framework, info, failure, start);
            }
            Err(ScheduleError::Error(status)) => {
                let failure = Failure {
                    message: status.message(),
                    reason: if status.is_rejected() {
                        "Unschedulable"
                    } else {
                        "SchedulerError"
                    },
                    plugins: BTreeSet::new(),
                    errored: true,
                    post_filter: None,
                };
                self.fail(&framework, info, failure, start);
            }
        }
    }

    /// Preemption, when the profile has it: its message joins the FitError's.
    fn post_filter(
        &self,
        framework: &Framework,
        state: &CycleState,
        pod: &PodInfo,
        fit: &mut FitError,
        snapshot: &Snapshot,
        nominated: &dyn NominatedPods,
    ) -> Option<PostFilterResult> {
        if !framework.has_post_filter() {
            return None;
        }
        self.metrics.preemption_attempts.inc();
        let context = PostFilterContext {
            snapshot,
            framework,
            nominated,
        };
        let (result, status) =
            framework.run_post_filter(state, pod, &fit.diagnosis.node_statuses, &context);
        let message = status.message();
        if !message.is_empty() {
            fit.diagnosis.post_filter_message = Some(message);
        }
        result
    }

    fn assume_and_bind(
        self: &Arc<Self>,
        framework: Arc<Framework>,
        mut state: CycleState,
        info: QueuedPodInfo,
        placement: Placement,
        start: Instant,
    ) {
        let pod = info.pod.clone();
        let node = placement.node;
        if let Err(error) = self.cache.lock().assume(pod.clone(), &node) {
            let failure = Failure {
                message: error.to_string(),
                reason: "SchedulerError",
                plugins: BTreeSet::new(),
                errored: true,
                post_filter: None,
            };
            return self.fail(&framework, info, failure, start);
        }
        let mut status = framework.run_reserve(&mut state, &pod, &node);
        if status.is_success() {
            status = framework.run_permit(&mut state, &pod, &node);
        }
        if !status.is_success() {
            framework.run_unreserve(&mut state, &pod, &node);
            let _ = self.cache.lock().forget(&pod.key);
            let plugins: BTreeSet<&'static str> = [status.plugin]
                .into_iter()
                .filter(|p| !p.is_empty())
                .collect();
            let failure = Failure {
                message: status.message(),
                reason: if status.is_rejected() {
                    "Unschedulable"
                } else {
                    "SchedulerError"
                },
                errored: !status.is_rejected(),
                plugins,
                post_filter: None,
            };
            return self.fail(&framework, info, failure, start);
        }
        self.queue.done(&pod.key);
        self.queue.clear_nomination(&pod.key);
        self.bindings_in_flight.fetch_add(1, Ordering::AcqRel);
        let scheduler = self.clone();
        let in_flight = self.bindings_in_flight.clone();
        self.runtime.spawn(async move {
            scheduler.bind(framework, state, info, node, start).await;
            in_flight.fetch_sub(1, Ordering::AcqRel);
        });
    }

    async fn bind(
        self: Arc<Self>,
        framework: Arc<Framework>,
        mut state: CycleState,
        info: QueuedPodInfo,
        node: String,
        start: Instant,
    ) {
        let pod = info.pod.clone();
        let target = PodRef::of(&pod.pod);
        let bind_start = Instant::now();
        let result = self.api.bind(&target, &node).await;
        let outcome = if result.is_ok() { "success" } else { "error" };
        let labels = super::metrics::BindingLabels { result: outcome };
        self.metrics
            .binding_duration
            .get_or_create(&labels)
            .observe(bind_start.elapsed().as_secs_f64());
        match result {
            Ok(()) => {
                self.cache.lock().finish_binding(&pod.key, Instant::now());
                self.metrics.attempt(
                    "scheduled",
                    &framework.scheduler_name,
                    start.elapsed().as_secs_f64(),
                );
                self.metrics
                    .pod_scheduling_attempts
                    .observe(f64::from(info.attempts));
                self.api.record(SchedulerEvent {
                    regarding: target.clone(),
                    related: None,
                    event_type: EventType::Normal,
                    reason: "Scheduled".into(),
                    action: "Binding".into(),
                    message: format!(
                        "Successfully assigned {}/{} to {node}",
                        target.namespace, target.name
                    ),
                });
            }
            Err(error) => {
                framework.run_unreserve(&mut state, &pod, &node);
                let _ = self.cache.lock().forget(&pod.key);
                // Its resources are free again: others may fit now.
                self.queue.move_all(crate::framework::ClusterEvent::new(
                    crate::framework::EventResource::AssignedPod,
                    crate::framework::ActionType::DELETE,
                ));
                if matches!(error, super::api::ApiError::NotFound(_)) {
                    return;
                }
                let failure = Failure {
                    message: format!("Binding rejected: {error}"),
                    reason: "SchedulerError",
                    plugins: BTreeSet::new(),
                    errored: true,
                    post_filter: None,
                };
                self.fail(&framework, info, failure, start);
            }
        }
    }

    /// Reports a failed attempt (Event, PodScheduled condition, nomination),
    /// starts the preemption it decided, and requeues the pod.
    fn fail(
        self: &Arc<Self>,
        framework: &Framework,
        mut info: QueuedPodInfo,
        failure: Failure,
        start: Instant,
    ) {
        let result = if failure.errored {
            "error"
        } else {
            "unschedulable"
        };
        self.metrics.attempt(
            result,
            &framework.scheduler_name,
            start.elapsed().as_secs_f64(),
        );
        let pod = info.pod.clone();
        let target = PodRef::of(&pod.pod);
        tracing::debug!(pod = %pod.full_name(), message = %failure.message, "unable to schedule pod");
        let had_nomination = pod
            .pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        let mut nominated_node_name = None;
        if let Some(result) = &failure.post_filter {
            if let Some(node) = &result.nominated_node {
                self.queue.nominate(pod.clone(), node);
                nominated_node_name = Some(node.clone());
                self.start_preemption(&target, node, result);
            } else if result.clear_nomination && had_nomination {
                self.queue.clear_nomination(&pod.key);
                nominated_node_name = Some(String::new());
            }
        }
        self.api.record(SchedulerEvent {
            regarding: target.clone(),
            related: None,
            event_type: EventType::Warning,
            reason: "FailedScheduling".into(),
            action: "Scheduling".into(),
            message: failure.message.clone(),
        });
        // As kube: no write when the pod already says so.
        if nominated_node_name.is_some()
            || !says_unschedulable(&pod, failure.reason, &failure.message)
        {
            let patch = StatusPatch {
                unschedulable: Some((failure.reason.to_string(), failure.message)),
                nominated_node_name,
            };
            let write = self.api.patch_status(&target, patch);
            self.runtime.spawn(async move {
                if let Err(error) = write.await {
                    tracing::debug!(%error, pod = %target.name, "could not update the pod's PodScheduled condition");
                }
            });
        }
        // Requeued last, so that whoever sees it back in the queue sees its reports made.
        info.unschedulable_plugins = failure.plugins;
        self.queue.add_unschedulable(info, failure.errored);
    }

    /// Evicts the victims gracefully and clears the nominations of the
    /// lower-priority pods the preemptor displaces.
    fn start_preemption(
        self: &Arc<Self>,
        preemptor: &PodRef,
        node: &str,
        result: &PostFilterResult,
    ) {
        self.metrics
            .preemption_victims
            .observe(result.victims.len() as f64);
        for victim in &result.victims {
            if victim.is_terminating() {
                continue;
            }
            let target = PodRef::of(&victim.pod);
            let scheduler_name = victim
                .spec()
                .scheduler_name
                .clone()
                .unwrap_or_else(|| super::profiles::DEFAULT_SCHEDULER_NAME.into());
            let eviction = self.api.preempt(
                &target,
                &format!("{scheduler_name}: preempting to accommodate a higher priority pod"),
            );
            self.api.record(SchedulerEvent {
                regarding: target.clone(),
                related: Some(preemptor.clone()),
                event_type: EventType::Normal,
                reason: "Preempted".into(),
                action: "Preempting".into(),
                message: format!("Preempted by pod {} on node {node}", preemptor.uid),
            });
            self.runtime.spawn(async move {
                if let Err(error) = eviction.await {
                    tracing::warn!(%error, victim = %target.name, "could not preempt pod");
                }
            });
        }
        for displaced in &result.displaced_nominations {
            self.queue.clear_nomination(&displaced.key);
            let patch = StatusPatch {
                unschedulable: None,
                nominated_node_name: Some(String::new()),
            };
            let write = self.api.patch_status(&PodRef::of(&displaced.pod), patch);
            self.runtime.spawn(async move {
                let _ = write.await;
            });
        }
    }

    /// Waits (polling) until no binding is in flight, at most `timeout`.
    pub fn wait_for_bindings(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.bindings_in_flight() > 0 {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }
}

/// Whether the pod's PodScheduled condition is already False with this reason and message.
fn says_unschedulable(pod: &PodInfo, reason: &str, message: &str) -> bool {
    let conditions = pod
        .pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    conditions.iter().any(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some(reason)
            && c.message.as_deref() == Some(message)
    })
}
