//! The probe: a client running through the whole run that makes the
//! calls SIG-scalability's API latency SLOs are about, each kind on its
//! own loop and connection, and keeps every latency by phase.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::objects::{self, PROBE_NAMESPACE};
use crate::apiserver::http::{Answer, Connection};
use crate::apiserver::ApiError;

/// Who the probe's calls act as: a plain user, so priority and fairness
/// put them in `global-default` like any user's, not in the exempt level
/// the admin's would go to (an exempt probe would not see queueing).
const PROBE_USER: &str = "density-probe";

/// The calls the SLOs name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A ConfigMap created, then deleted.
    Mutating,
    /// One ConfigMap read.
    Get,
    /// Every pod of the first (fullest) density namespace.
    NamespaceList,
    /// Every pod of the cluster.
    ClusterList,
}

pub const KINDS: [Kind; 4] = [
    Kind::Mutating,
    Kind::Get,
    Kind::NamespaceList,
    Kind::ClusterList,
];

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Mutating => "mutating",
            Kind::Get => "get",
            Kind::NamespaceList => "namespace list",
            Kind::ClusterList => "cluster list",
        }
    }

    /// The SLO on its p99.
    pub fn slo(self) -> Duration {
        match self {
            Kind::Mutating | Kind::Get => Duration::from_secs(1),
            Kind::NamespaceList => Duration::from_secs(5),
            Kind::ClusterList => Duration::from_secs(30),
        }
    }

    /// How often the probe makes it: often for the cheap calls, rarely
    /// for a list of every pod (tens of MB at 30,000 pods).
    fn period(self) -> Duration {
        match self {
            Kind::Mutating | Kind::Get => Duration::from_millis(200),
            Kind::NamespaceList => Duration::from_secs(2),
            Kind::ClusterList => Duration::from_secs(30),
        }
    }

    fn index(self) -> usize {
        KINDS.iter().position(|k| *k == self).expect("listed")
    }
}

/// Latencies of one phase, by kind (milliseconds), and failed calls.
pub struct PhaseLatencies {
    pub latencies: Vec<Histogram<u64>>,
    pub errors: Vec<u64>,
}

impl PhaseLatencies {
    fn new() -> PhaseLatencies {
        PhaseLatencies {
            latencies: KINDS
                .iter()
                .map(|_| Histogram::new_with_bounds(1, 3_600_000, 3).expect("valid bounds"))
                .collect(),
            errors: vec![0; KINDS.len()],
        }
    }

    pub fn of(&self, kind: Kind) -> (&Histogram<u64>, u64) {
        (&self.latencies[kind.index()], self.errors[kind.index()])
    }
}

/// What the probe saw.
pub struct ProbeLog {
    pub phases: Vec<PhaseLatencies>,
    /// (seconds since the run started, kind, milliseconds), for the plot.
    pub points: Vec<(f64, Kind, f64)>,
    pub last_error: Option<String>,
}

impl ProbeLog {
    pub fn phase(&mut self, phase: usize) -> &mut PhaseLatencies {
        while self.phases.len() <= phase {
            self.phases.push(PhaseLatencies::new());
        }
        &mut self.phases[phase]
    }
}

/// The probe, running on its own tasks until `stop`.
pub struct Probe {
    pub log: Arc<Mutex<ProbeLog>>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Where the probe sends its calls and which phase they count in.
#[derive(Clone)]
struct Target {
    port: u16,
    timeout: Duration,
    phase: Arc<AtomicUsize>,
    started: Instant,
    log: Arc<Mutex<ProbeLog>>,
    stop: Arc<AtomicBool>,
}

impl Probe {
    /// Creates the probe's namespace and the ConfigMap it reads, then
    /// starts one loop per kind.
    pub async fn start(
        port: u16,
        timeout: Duration,
        phase: Arc<AtomicUsize>,
        started: Instant,
    ) -> Result<Probe, String> {
        let mut connection = Connection::new(port, timeout);
        super::api::create(
            &mut connection,
            "/api/v1/namespaces",
            objects::namespace(PROBE_NAMESPACE),
        )
        .await?;
        let maps = format!("/api/v1/namespaces/{PROBE_NAMESPACE}/configmaps");
        super::api::create(&mut connection, &maps, objects::config_map("probe-target")).await?;
        let rbac = "/apis/rbac.authorization.k8s.io/v1";
        let (role, binding) = objects::probe_role(PROBE_USER);
        super::api::create(&mut connection, &format!("{rbac}/clusterroles"), role).await?;
        super::api::create(
            &mut connection,
            &format!("{rbac}/clusterrolebindings"),
            binding,
        )
        .await?;
        wait_until_authorized(port, timeout).await?;
        let log = Arc::new(Mutex::new(ProbeLog {
            phases: Vec::new(),
            points: Vec::new(),
            last_error: None,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let target = Target {
            port,
            timeout,
            phase,
            started,
            log: log.clone(),
            stop: stop.clone(),
        };
        let tasks = KINDS
            .iter()
            .map(|kind| tokio::spawn(run_kind(target.clone(), *kind)))
            .collect();
        Ok(Probe { log, stop, tasks })
    }

    pub async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// Waits until the API server's authorizer has the probe's role and
/// binding (it learns them from a watch, a moment after they are
/// written), so the probe measures latencies rather than that moment's
/// 403s.
async fn wait_until_authorized(port: u16, timeout: Duration) -> Result<(), String> {
    let mut connection = Connection::impersonating(port, timeout, PROBE_USER);
    let path = format!("/api/v1/namespaces/{PROBE_NAMESPACE}/configmaps/probe-target");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let last = match connection.get(&path).await {
            Ok(answer) if answer.status.is_success() => return Ok(()),
            Ok(answer) => answer.status.to_string(),
            Err(err) => err.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(format!(
                "the probe's role did not take effect in 30 s: {last}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn run_kind(target: Target, kind: Kind) {
    let mut connection = Connection::impersonating(target.port, target.timeout, PROBE_USER);
    let mut tick = tokio::time::interval(kind.period());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut serial = 0u64;
    while !target.stop.load(Ordering::Relaxed) {
        tick.tick().await;
        serial += 1;
        match kind {
            Kind::Mutating => {
                let name = format!("probe-{serial}");
                let maps = format!("/api/v1/namespaces/{PROBE_NAMESPACE}/configmaps");
                let created = connection.post(&maps, objects::config_map(&name));
                target.timed(kind, created).await;
                let path = format!("{maps}/{name}");
                target.timed(kind, connection.delete(&path)).await;
            }
            Kind::Get => {
                let path = format!("/api/v1/namespaces/{PROBE_NAMESPACE}/configmaps/probe-target");
                target.timed(kind, connection.get(&path)).await;
            }
            Kind::NamespaceList => {
                let path = format!("/api/v1/namespaces/{}/pods", objects::namespace_of(0));
                target.timed(kind, connection.get(&path)).await;
            }
            Kind::ClusterList => target.timed(kind, connection.get("/api/v1/pods")).await,
        }
    }
}

impl Target {
    async fn timed(
        &self,
        kind: Kind,
        call: impl std::future::Future<Output = Result<Answer, ApiError>>,
    ) {
        let begun = Instant::now();
        let answer = call.await;
        let millis = begun.elapsed().as_secs_f64() * 1000.0;
        let phase = self.phase.load(Ordering::Relaxed);
        let at = self.started.elapsed().as_secs_f64();
        let mut log = self.log.lock().expect("probe log");
        let failed = match answer {
            Ok(answer) if answer.status.is_success() => None,
            Ok(answer) => Some(format!(
                "{}: {}: {}",
                kind.name(),
                answer.status,
                String::from_utf8_lossy(&answer.body[..answer.body.len().min(300)])
            )),
            Err(err) => Some(format!("{}: {err}", kind.name())),
        };
        let latencies = log.phase(phase);
        latencies.latencies[kind.index()].saturating_record(millis.max(1.0) as u64);
        if failed.is_some() {
            latencies.errors[kind.index()] += 1;
        }
        log.points.push((at, kind, millis));
        if failed.is_some() {
            log.last_error = failed;
        }
    }
}
