//! A benchmark in kube's scheduler_perf shape: N nodes, some pods placed
//! first, then M pods measured from their creation until every one is bound
//! (the binding writes included, here to the in-memory API). Workloads:
//! SchedulingBasic, PodTopologySpread over three zones, and required
//! InterPodAffinity, with scheduler_perf's node and pod templates.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    Affinity, Pod, PodAffinity, PodAffinityTerm, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::config::SchedulerConfig;
use crate::core::memory_api::MemoryApi;
use crate::core::Scheduler;
use crate::framework::StaticLister;
use crate::model::testing::{NodeBuilder, PodBuilder};
use crate::model::LabelMatcher;

const ZONE: &str = "topology.kubernetes.io/zone";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// SchedulingBasic: plain pods of 100m / 500Mi.
    Basic,
    /// Pods spread over three zones (maxSkew 5, DoNotSchedule).
    TopologySpread,
    /// Pods with required affinity to each other by zone.
    InterPodAffinity,
    /// Pods of 30 ReplicaSets, 100 consecutive pods each in turn, with no
    /// constraint of their own: kube's default spreading (hostname and
    /// zone, ScheduleAnyway) applies, as to a Deployment's pods.
    DefaultSpread,
    /// kube's default spreading over the pods of 300 ReplicaSets, 5 in a
    /// row of each in turn: many workloads scaling up at once, as in the
    /// density run (300 Deployments created together).
    ManyWorkloads,
}

impl Workload {
    pub fn parse(name: &str) -> Option<Workload> {
        match name {
            "basic" | "SchedulingBasic" => Some(Workload::Basic),
            "spread" | "TopologySpreading" => Some(Workload::TopologySpread),
            "affinity" | "InterPodAffinity" => Some(Workload::InterPodAffinity),
            "default-spread" | "DefaultSpread" => Some(Workload::DefaultSpread),
            "many-workloads" | "ManyWorkloads" => Some(Workload::ManyWorkloads),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Workload::Basic => "SchedulingBasic",
            Workload::TopologySpread => "TopologySpreading",
            Workload::InterPodAffinity => "InterPodAffinity",
            Workload::DefaultSpread => "DefaultSpread",
            Workload::ManyWorkloads => "ManyWorkloads",
        }
    }

    /// The ReplicaSets whose pods are created, and how many pods of one
    /// come in a row (none for the workloads without default spreading).
    fn replica_sets(self) -> (usize, usize) {
        match self {
            Workload::DefaultSpread => (30, 100),
            Workload::ManyWorkloads => (300, 5),
            _ => (0, 1),
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct PerfSpec {
    pub workload: Workload,
    pub nodes: usize,
    pub init_pods: usize,
    pub measure_pods: usize,
}

#[derive(Debug, Clone)]
pub struct PerfResult {
    pub spec: PerfSpec,
    /// Measured pods bound per second of wall time.
    pub pods_per_second: f64,
    pub elapsed: Duration,
    /// This process's CPU time (all threads) over the measured phase.
    pub cpu: Duration,
    /// Measured pods per second of CPU time: steadier than wall time on a shared machine.
    pub pods_per_cpu_second: f64,
}

impl std::fmt::Display for PerfResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} nodes, {} init pods, {} measured pods: {:.0} pods/s ({:.2} s), {:.0} pods per CPU-second ({:.2} CPU-s)",
            self.spec.workload.name(),
            self.spec.nodes,
            self.spec.init_pods,
            self.spec.measure_pods,
            self.pods_per_second,
            self.elapsed.as_secs_f64(),
            self.pods_per_cpu_second,
            self.cpu.as_secs_f64()
        )
    }
}

/// scheduler_perf's default node: 4 cpus, 32Gi, 110 pods; three zones.
fn node(i: usize) -> k8s_openapi::api::core::v1::Node {
    NodeBuilder::new(&format!("node-{i}"))
        .capacity("4", "32Gi", 110)
        .label(ZONE, &format!("zone-{}", i % 3))
        .build()
}

fn pod(workload: Workload, name: &str, index: usize) -> Pod {
    let base = PodBuilder::new(name)
        .namespace("sched-test")
        .req("100m", "500Mi")
        .uid(&format!("uid-{name}"));
    let selector = |key: &str, value: &str| LabelSelector {
        match_labels: Some(BTreeMap::from([(key.to_string(), value.to_string())])),
        match_expressions: None,
    };
    match workload {
        Workload::Basic => base.build(),
        Workload::DefaultSpread | Workload::ManyWorkloads => {
            base.label("app", &replica_set_of(workload, index)).build()
        }
        Workload::TopologySpread => base
            .label("foo", "bar")
            .spread(TopologySpreadConstraint {
                max_skew: 5,
                topology_key: ZONE.into(),
                when_unsatisfiable: "DoNotSchedule".into(),
                label_selector: Some(selector("foo", "bar")),
                ..Default::default()
            })
            .build(),
        Workload::InterPodAffinity => base
            .label("foo", "")
            .affinity(Affinity {
                pod_affinity: Some(PodAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![
                        PodAffinityTerm {
                            label_selector: Some(selector("foo", "")),
                            topology_key: ZONE.into(),
                            namespaces: Some(vec!["sched-test".into()]),
                            ..Default::default()
                        },
                    ]),
                    preferred_during_scheduling_ignored_during_execution: None,
                }),
                ..Default::default()
            })
            .build(),
    }
}

fn replica_set_of(workload: Workload, pod_index: usize) -> String {
    let (replica_sets, in_a_row) = workload.replica_sets();
    format!("rs-{}", (pod_index / in_a_row) % replica_sets)
}

/// The ReplicaSets' selectors, for kube's default spreading.
fn lister(workload: Workload) -> StaticLister {
    let selectors = (0..workload.replica_sets().0)
        .map(|i| {
            let labels = BTreeMap::from([("app".to_string(), format!("rs-{i}"))]);
            LabelMatcher::new(Some(&LabelSelector {
                match_labels: Some(labels),
                match_expressions: None,
            }))
        })
        .collect();
    StaticLister {
        workloads: [("sched-test".to_string(), selectors)].into(),
        ..StaticLister::default()
    }
}

/// User plus system CPU time of this process so far (Linux `/proc/self/stat`).
pub fn process_cpu_time() -> Duration {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return Duration::ZERO;
    };
    // Fields after the command (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after ')'.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

fn wait_bound(api: &MemoryApi, count: usize, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    while api.bound() < count {
        if Instant::now() > deadline {
            return Err(format!(
                "only {} of {count} pods bound within {timeout:?}",
                api.bound()
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Runs one workload on a fresh scheduler; `timeout` bounds each phase.
pub fn run(spec: PerfSpec, timeout: Duration) -> Result<PerfResult, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let api = MemoryApi::new();
    let scheduler = Scheduler::new(
        &SchedulerConfig::default(),
        Arc::new(lister(spec.workload)),
        api.clone(),
        runtime.handle().clone(),
    )
    .map_err(|e| format!("{}: {}", e.field, e.message))?;
    api.watch(&scheduler);
    let thread = scheduler.start();
    for i in 0..spec.nodes {
        api.add_node(node(i));
    }
    for i in 0..spec.init_pods {
        api.create_pod(pod(spec.workload, &format!("init-{i}"), i));
    }
    wait_bound(&api, spec.init_pods, timeout)?;
    let cpu_before = process_cpu_time();
    let start = Instant::now();
    for i in 0..spec.measure_pods {
        api.create_pod(pod(spec.workload, &format!("pod-{i}"), i));
    }
    let outcome = wait_bound(&api, spec.init_pods + spec.measure_pods, timeout);
    let elapsed = start.elapsed();
    let cpu = process_cpu_time().saturating_sub(cpu_before);
    scheduler.stop();
    let _ = thread.join();
    outcome?;
    let per = |d: Duration| spec.measure_pods as f64 / d.as_secs_f64().max(1e-9);
    Ok(PerfResult {
        spec,
        pods_per_second: per(elapsed),
        elapsed,
        cpu,
        pods_per_cpu_second: per(cpu),
    })
}
