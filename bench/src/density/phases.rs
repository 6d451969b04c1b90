//! The density run's phases, in order, on one control plane; what they
//! measured is handed to the report.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::api::{self, Call};
use super::control_plane::{wait_until, ControlPlane, Shape};
use super::probe::{Probe, ProbeLog};
use super::tenant::{Tenant, TenantSummary};
use super::{cluster, objects, sampler, watch, DensityConfig, PHASES};
use crate::checks::Checks;

/// What the run measured.
pub struct Measured {
    /// Start and end of each phase, in seconds since the run started.
    pub spans: Vec<(f64, f64)>,
    /// CPU seconds of each process at each phase's start, and at the end.
    pub cpu_marks: Vec<BTreeMap<String, f64>>,
    /// The stores' bytes on disk at each phase's end.
    pub store_bytes: Vec<u64>,
    pub nodes_ready_s: Option<f64>,
    pub pods_ready_s: Option<f64>,
    pub churn_deleted: usize,
    pub failover: Option<Failover>,
    pub tracker: watch::Shared,
    pub probe: Arc<std::sync::Mutex<ProbeLog>>,
    pub samples: sampler::Shared,
    /// What the noisy tenant got during the churn, if there was one.
    pub tenant: Option<TenantSummary>,
}

/// The controllers' API server killed mid-ramp.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Failover {
    pub killed_at_s: f64,
    pub ready_when_killed: usize,
    /// From the kill until another controller manager held the Lease.
    pub new_leader_after_s: Option<f64>,
    /// The longest time after the kill in which no pod became Ready.
    pub longest_stall_s: f64,
}

struct Run<'a> {
    config: &'a DensityConfig,
    shape: Shape,
    plane: ControlPlane,
    runtime: tokio::runtime::Runtime,
    started: Instant,
    phase: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    measured: Measured,
    probe: Option<Probe>,
    /// Sends how long after the kill another controller manager led.
    pending_leader: Option<std::sync::mpsc::Receiver<f64>>,
    last_progress: Instant,
}

/// Starts the control plane and runs every phase; a phase that fails
/// ends the run, with what was measured so far still reported.
pub fn run(config: &DensityConfig, checks: &mut Checks) -> Result<Measured, String> {
    let shape = Shape {
        cluster: config.cluster,
        client_qps: config.client_qps,
        controller_qps: config.controller_qps,
        startup_timeout: config.startup_timeout,
    };
    // Processes start on the main thread (their parent-death signal
    // follows the thread that forked them).
    let plane = ControlPlane::start(&shape)?;
    let mut run = Run::new(config, shape, plane)?;
    let outcome = run.phases(checks);
    run.finish(checks);
    if let Err(err) = outcome {
        checks.record("density: every phase ran", false, err);
    }
    Ok(run.measured)
}

impl<'a> Run<'a> {
    fn new(
        config: &'a DensityConfig,
        shape: Shape,
        plane: ControlPlane,
    ) -> Result<Run<'a>, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("runtime: {e}"))?;
        let started = Instant::now();
        let samples = sampler::Shared::default();
        {
            let mut samples = samples.lock().expect("samples");
            samples.processes = plane.pids();
            samples.metrics_ports = plane.metrics_ports.clone();
        }
        let phase = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let tracker = watch::Tracker::new(started);
        runtime.spawn(sampler::run(
            samples.clone(),
            phase.clone(),
            started,
            stop.clone(),
        ));
        let follow = watch::follow(plane.port, tracker.clone(), stop.clone());
        runtime.spawn(async move {
            if let Err(err) = follow.await {
                eprintln!("density: the pods watch failed: {err}");
            }
        });
        let probe = runtime.block_on(Probe::start(
            plane.port,
            config.request_timeout,
            phase.clone(),
            started,
        ))?;
        let measured = Measured {
            spans: vec![(0.0, 0.0)],
            cpu_marks: vec![cpu_now(&plane)],
            store_bytes: Vec::new(),
            nodes_ready_s: None,
            pods_ready_s: None,
            churn_deleted: 0,
            failover: None,
            tracker,
            probe: probe.log.clone(),
            samples,
            tenant: None,
        };
        let run = Run {
            config,
            shape,
            plane,
            runtime,
            started,
            phase,
            stop,
            measured,
            probe: Some(probe),
            pending_leader: None,
            last_progress: Instant::now(),
        };
        Ok(run)
    }

    fn phases(&mut self, checks: &mut Checks) -> Result<(), String> {
        self.nodes(checks)?;
        self.ramp(checks)?;
        if !self.config.churn.is_zero() {
            self.churn(checks)?;
        }
        self.delete(checks)
    }

    /// Ends the current phase and starts `index`.
    fn enter(&mut self, index: usize) {
        let now = self.started.elapsed().as_secs_f64();
        if let Some(last) = self.measured.spans.last_mut() {
            last.1 = now;
        }
        self.measured.store_bytes.push(self.plane.store_bytes());
        // A skipped phase (no churn) keeps its place, empty, so that every
        // measurement of a phase stays at the phase's index.
        while index < PHASES.len() && self.measured.spans.len() < index {
            self.measured.spans.push((now, now));
            self.measured.cpu_marks.push(cpu_now(&self.plane));
            self.measured.store_bytes.push(self.plane.store_bytes());
        }
        if index < PHASES.len() {
            self.measured.spans.push((now, now));
            self.measured.cpu_marks.push(cpu_now(&self.plane));
            self.phase.store(index, Ordering::Relaxed);
            self.measured.tracker.lock().expect("tracker").phase = index;
            self.say(format!("density: phase {}", PHASES[index]));
        } else {
            self.measured.cpu_marks.push(cpu_now(&self.plane));
        }
    }

    fn nodes(&mut self, checks: &mut Checks) -> Result<(), String> {
        self.enter(1);
        let begun = Instant::now();
        self.plane.start_nodes(self.config.nodes, &self.shape)?;
        self.measured.samples.lock().expect("samples").processes = self.plane.pids();
        let want = self.config.nodes;
        let timeout = Duration::from_secs(120).max(Duration::from_millis(50) * want as u32);
        let mut connection =
            crate::apiserver::http::Connection::new(self.plane.port, self.config.request_timeout);
        let mut ready = 0;
        let waited = wait_until("every node Ready", timeout, || {
            ready = self
                .runtime
                .block_on(api::ready_nodes(&mut connection))
                .unwrap_or(ready);
            ready >= want
        });
        let seconds = begun.elapsed().as_secs_f64();
        checks.record(
            format!("density: {want} nodes Ready"),
            waited.is_ok(),
            format!("{ready} Ready after {seconds:.1} s"),
        );
        waited?;
        self.measured.nodes_ready_s = Some(seconds);
        Ok(())
    }

    fn ramp(&mut self, checks: &mut Checks) -> Result<(), String> {
        self.enter(2);
        let begun = Instant::now();
        let calls = self.ramp_calls();
        self.runtime.block_on(api::each(
            self.plane.port,
            calls.0,
            self.config.clients,
            self.config.request_timeout,
        ))?;
        self.runtime.block_on(api::each(
            self.plane.port,
            calls.1,
            self.config.clients,
            self.config.request_timeout,
        ))?;
        let total = self.config.pods();
        let timeout = Duration::from_secs(600).max(Duration::from_millis(50) * total as u32);
        let done = self.wait_ready(total, timeout, true);
        let seconds = begun.elapsed().as_secs_f64();
        let ready = self.ready();
        checks.record(
            format!("density: {total} pods Ready"),
            done.is_ok(),
            format!(
                "{ready} Ready after {seconds:.1} s ({:.0} pods/s)",
                ready as f64 / seconds
            ),
        );
        done?;
        self.measured.pods_ready_s = Some(seconds);
        self.check_replicas(checks);
        Ok(())
    }

    /// The namespaces, then the Deployments, to create.
    fn ramp_calls(&self) -> (Vec<Call>, Vec<Call>) {
        let namespaces = (0..objects::namespace_count(self.config.deployments))
            .map(|i| {
                let name = format!("density-{i}");
                Call::Create("/api/v1/namespaces".into(), objects::namespace(&name))
            })
            .collect();
        let deployments = (0..self.config.deployments)
            .rev()
            .map(|i| {
                let path = format!(
                    "/apis/apps/v1/namespaces/{}/deployments",
                    objects::namespace_of(i)
                );
                Call::Create(path, objects::deployment(i, self.config.replicas))
            })
            .collect();
        (namespaces, deployments)
    }

    /// Waits until `want` pods are Ready, saying how far it got; on the
    /// cluster (if `failover`), kills the controllers' API server half-way.
    fn wait_ready(&mut self, want: usize, timeout: Duration, failover: bool) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let ready = self.ready();
            if ready >= want {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("{ready} of {want} pods Ready within {timeout:?}"));
            }
            if failover
                && self.config.cluster
                && self.measured.failover.is_none()
                && ready >= want / 2
            {
                self.kill_controller_leader(ready);
            }
            self.check_alive()?;
            self.progress();
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn kill_controller_leader(&mut self, ready: usize) {
        let holder = self
            .runtime
            .block_on(cluster::controller_leader(self.plane.port));
        self.say(format!(
            "density: killing {} (its controller manager holds the Lease: {holder:?}) at {ready} pods Ready",
            cluster::LEADING_APISERVER
        ));
        self.plane.kill(cluster::LEADING_APISERVER);
        self.measured.samples.lock().expect("samples").processes = self.plane.pids();
        let killed = Instant::now();
        let killed_at_s = self.started.elapsed().as_secs_f64();
        self.measured.failover = Some(Failover {
            killed_at_s,
            ready_when_killed: ready,
            new_leader_after_s: None,
            longest_stall_s: 0.0,
        });
        let port = self.plane.port;
        let (sender, receiver) = std::sync::mpsc::channel();
        self.runtime.spawn(async move {
            loop {
                let now = cluster::controller_leader(port).await;
                if now.is_some() && now != holder {
                    let _ = sender.send(killed.elapsed().as_secs_f64());
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        self.pending_leader = Some(receiver);
    }

    fn churn(&mut self, checks: &mut Checks) -> Result<(), String> {
        self.enter(3);
        let loops = self.config.noisy_tenant_loops;
        let (port, timeout) = (self.plane.port, self.config.request_timeout);
        let tenant = match loops {
            0 => None,
            _ => Some(self.runtime.block_on(Tenant::start(port, timeout, loops))?),
        };
        let end = Instant::now() + self.config.churn;
        let mut tick = Instant::now();
        let mut offset = 0;
        while Instant::now() < end {
            let picked = self
                .measured
                .tracker
                .lock()
                .expect("tracker")
                .pick_ready(self.config.churn_rate, offset);
            offset += 7919;
            self.measured.churn_deleted += picked.len();
            let calls = picked
                .into_iter()
                .map(|key| {
                    let (namespace, name) = key.split_once('/').unwrap_or(("default", &key));
                    Call::Delete(format!("/api/v1/namespaces/{namespace}/pods/{name}"))
                })
                .collect();
            self.runtime.block_on(api::each(
                self.plane.port,
                calls,
                4,
                self.config.request_timeout,
            ))?;
            self.check_alive()?;
            self.progress();
            tick += Duration::from_secs(1);
            std::thread::sleep(tick.saturating_duration_since(Instant::now()));
        }
        if let Some(tenant) = tenant {
            let summary = self.runtime.block_on(tenant.stop(loops));
            self.say(summary.line());
            self.measured.tenant = Some(summary);
        }
        let total = self.config.pods();
        let settled = self.wait_ready(total, Duration::from_secs(300), false);
        checks.record(
            "density: every Deployment whole again after the churn",
            settled.is_ok(),
            format!(
                "{} pods deleted at {}/s; {} Ready",
                self.measured.churn_deleted,
                self.config.churn_rate,
                self.ready()
            ),
        );
        settled
    }

    fn delete(&mut self, checks: &mut Checks) -> Result<(), String> {
        self.enter(4);
        let begun = Instant::now();
        let calls = (0..self.config.deployments)
            .map(|i| {
                Call::Delete(format!(
                    "/apis/apps/v1/namespaces/{}/deployments/{}",
                    objects::namespace_of(i),
                    objects::deployment_name(i)
                ))
            })
            .collect();
        self.runtime.block_on(api::each(
            self.plane.port,
            calls,
            self.config.clients,
            self.config.request_timeout,
        ))?;
        let timeout =
            Duration::from_secs(600).max(Duration::from_millis(50) * self.config.pods() as u32);
        let tracker = self.measured.tracker.clone();
        let gone = wait_until("every pod deleted", timeout, || {
            tracker.lock().expect("tracker").pods() == 0
        });
        let left = tracker.lock().expect("tracker").pods();
        checks.record(
            "density: every pod deleted with its Deployment",
            gone.is_ok(),
            format!("{left} left after {:.1} s", begun.elapsed().as_secs_f64()),
        );
        let namespaces = (0..objects::namespace_count(self.config.deployments))
            .map(|i| Call::Delete(format!("/api/v1/namespaces/density-{i}")))
            .collect();
        self.runtime.block_on(api::each(
            self.plane.port,
            namespaces,
            4,
            self.config.request_timeout,
        ))?;
        gone
    }
}

impl Run<'_> {
    fn ready(&self) -> usize {
        self.measured.tracker.lock().expect("tracker").ready()
    }

    /// An error naming any process of the control plane that exited.
    fn check_alive(&mut self) -> Result<(), String> {
        match self.plane.exited().as_slice() {
            [] => Ok(()),
            exited => Err(format!("exited during the run: {}", exited.join("\n"))),
        }
    }

    fn say(&self, line: String) {
        if self.config.progress {
            eprintln!("[{:>6.1} s] {line}", self.started.elapsed().as_secs_f64());
        }
    }

    /// A line every five seconds: pods, RSS, the busiest queue.
    fn progress(&mut self) {
        if self.last_progress.elapsed() < Duration::from_secs(5) {
            return;
        }
        self.last_progress = Instant::now();
        let (ready, pods) = {
            let tracker = self.measured.tracker.lock().expect("tracker");
            (tracker.ready(), tracker.pods())
        };
        let (rss, queue) = {
            let samples = self.measured.samples.lock().expect("samples");
            let last = samples.taken.last();
            let rss: f64 = last.map_or(0.0, |s| s.rss_mb.values().sum());
            let queue = last
                .and_then(|s| s.queues.iter().max_by(|a, b| a.1.total_cmp(b.1)))
                .map_or(String::new(), |(name, depth)| {
                    format!(", deepest queue {name} {depth}")
                });
            (rss, queue)
        };
        self.say(format!(
            "{pods} pods, {ready} Ready; RSS {rss:.0} MB{queue}"
        ));
    }

    /// No Deployment ever had more live pods than its replicas.
    fn check_replicas(&self, checks: &mut Checks) {
        let tracker = self.measured.tracker.lock().expect("tracker");
        let replicas = self.config.replicas;
        let over: Vec<String> = tracker
            .most_live
            .iter()
            .filter(|(_, most)| **most > replicas)
            .map(|(name, most)| format!("{name}: {most}"))
            .collect();
        checks.record(
            format!("density: no Deployment had more than {replicas} live pods"),
            over.is_empty(),
            if over.is_empty() {
                "none did".to_string()
            } else {
                over.join(", ")
            },
        );
    }

    /// Stops the probe, the watch and the sampler; checks the processes.
    fn finish(&mut self, checks: &mut Checks) {
        self.enter(PHASES.len());
        if let Some(probe) = self.probe.take() {
            self.runtime.block_on(probe.stop());
        }
        self.stop.store(true, Ordering::Relaxed);
        if let (Some(failover), Some(receiver)) =
            (&mut self.measured.failover, &self.pending_leader)
        {
            failover.new_leader_after_s = receiver.try_recv().ok();
        }
        let exited = self.plane.exited();
        checks.record(
            "density: every process of the control plane still runs",
            exited.is_empty(),
            if exited.is_empty() {
                "all do".to_string()
            } else {
                exited.join("\n")
            },
        );
        let log = self.measured.probe.lock().expect("probe");
        let failed: u64 = log.phases.iter().flat_map(|p| p.errors.iter()).sum();
        checks.record(
            "density: the probe's calls all succeeded",
            failed == 0,
            format!(
                "{failed} failed; last: {}",
                log.last_error.as_deref().unwrap_or("-")
            ),
        );
    }
}

/// CPU seconds of every process now.
fn cpu_now(plane: &ControlPlane) -> BTreeMap<String, f64> {
    plane
        .pids()
        .into_iter()
        .filter_map(|(name, pid)| Some((name, crate::cpu::process_cpu_seconds(pid)?)))
        .collect()
}
