//! The density run's results: per phase (wall time, pods/s, startup
//! latency, the probe's latencies against the SLOs, CPU and RSS of each
//! process, the store's size, the deepest queues), the targets of a
//! 1,000-node run, and everything as JSON.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::phases::{Failover, Measured};
use super::probe::KINDS;
use super::sampler::Sample;
use super::{DensityConfig, PHASES};

#[derive(Debug, Clone, Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50_ms: u64,
    pub p90_ms: u64,
    pub p99_ms: u64,
}

impl Percentiles {
    fn of(histogram: &Histogram<u64>) -> Percentiles {
        let at = |q: f64| {
            if histogram.is_empty() {
                0
            } else {
                histogram.value_at_quantile(q)
            }
        };
        Percentiles {
            count: histogram.len(),
            p50_ms: at(0.5),
            p90_ms: at(0.9),
            p99_ms: at(0.99),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ProbeRow {
    pub kind: &'static str,
    pub latency: Percentiles,
    pub errors: u64,
    pub slo_ms: u64,
    pub held: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct PhaseReport {
    pub name: &'static str,
    pub wall_s: f64,
    /// Pods that became Ready during the phase, per second of it.
    pub ready_per_s: f64,
    /// Creation to Ready: as the watch saw it, and by the pods' own timestamps.
    pub startup_watched: Percentiles,
    pub startup_stamped: Percentiles,
    pub probe: Vec<ProbeRow>,
    pub cpu_s: BTreeMap<String, f64>,
    pub peak_rss_mb: BTreeMap<String, f64>,
    /// The whole control plane's RSS (the simulated nodes apart): at the
    /// phase's start, end and peak.
    pub total_rss_mb: (f64, f64, f64),
    pub store_mb: f64,
    pub deepest_queues: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Target {
    pub what: String,
    pub target: String,
    pub measured: String,
    pub met: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub shape: &'static str,
    pub nodes: usize,
    pub deployments: usize,
    pub replicas: usize,
    pub churn_s: f64,
    pub churn_rate: usize,
    pub client_qps: u32,
    pub controller_qps: u32,
    pub nodes_ready_s: Option<f64>,
    pub pods_ready_s: Option<f64>,
    pub pods_per_s: Option<f64>,
    pub churn_deleted: usize,
    pub failover: Option<Failover>,
    pub noisy_tenant: Option<super::tenant::TenantSummary>,
    pub phases: Vec<PhaseReport>,
    pub targets: Vec<Target>,
    pub ready_series: Vec<(f64, usize)>,
    pub samples: Vec<Sample>,
}

pub fn build(config: &DensityConfig, measured: &Measured) -> Report {
    let samples = measured.samples.lock().expect("samples").taken.clone();
    let mut tracker = measured.tracker.lock().expect("tracker");
    let mut probe = measured.probe.lock().expect("probe");
    let mut phases = Vec::new();
    for (index, span) in measured.spans.iter().enumerate().skip(1) {
        if span.0 == span.1 {
            continue; // skipped (see `enter`)
        }
        let wall_s = (span.1 - span.0).max(1e-3);
        let startup = tracker.startup_of(index);
        let (startup_watched, startup_stamped) = (
            Percentiles::of(&startup.watched),
            Percentiles::of(&startup.stamped),
        );
        let rows = probe_rows(probe.phase(index));
        let in_phase: Vec<&Sample> = samples.iter().filter(|s| s.phase == index).collect();
        phases.push(PhaseReport {
            name: PHASES[index],
            wall_s,
            ready_per_s: startup_watched.count as f64 / wall_s,
            startup_watched,
            startup_stamped,
            probe: rows,
            cpu_s: cpu_between(
                measured.cpu_marks.get(index),
                measured.cpu_marks.get(index + 1),
            ),
            peak_rss_mb: peak_rss(&in_phase),
            total_rss_mb: total_rss(&in_phase),
            store_mb: measured.store_bytes.get(index).copied().unwrap_or(0) as f64 / 1e6,
            deepest_queues: deepest(&in_phase),
        });
    }
    let mut failover = measured.failover.clone();
    if let Some(failover) = &mut failover {
        failover.longest_stall_s = longest_stall(&tracker.ready_series, failover.killed_at_s);
    }
    let mut report = Report {
        shape: if config.cluster {
            "3 capstan-store + 2 capstan-apiserver"
        } else {
            "capstan"
        },
        nodes: config.nodes,
        deployments: config.deployments,
        replicas: config.replicas,
        churn_s: config.churn.as_secs_f64(),
        churn_rate: config.churn_rate,
        client_qps: config.client_qps,
        controller_qps: config.controller_qps,
        nodes_ready_s: measured.nodes_ready_s,
        pods_ready_s: measured.pods_ready_s,
        pods_per_s: measured.pods_ready_s.map(|s| config.pods() as f64 / s),
        churn_deleted: measured.churn_deleted,
        failover,
        noisy_tenant: measured.tenant.clone(),
        phases,
        targets: Vec::new(),
        ready_series: tracker.ready_series.clone(),
        samples,
    };
    report.targets = targets(&report);
    report
}

fn probe_rows(phase: &super::probe::PhaseLatencies) -> Vec<ProbeRow> {
    KINDS
        .iter()
        .map(|kind| {
            let (histogram, errors) = phase.of(*kind);
            let latency = Percentiles::of(histogram);
            let slo_ms = kind.slo().as_millis() as u64;
            ProbeRow {
                kind: kind.name(),
                held: latency.p99_ms <= slo_ms,
                latency,
                errors,
                slo_ms,
            }
        })
        .collect()
}

fn cpu_between(
    start: Option<&BTreeMap<String, f64>>,
    end: Option<&BTreeMap<String, f64>>,
) -> BTreeMap<String, f64> {
    let (Some(start), Some(end)) = (start, end) else {
        return BTreeMap::new();
    };
    end.iter()
        .map(|(name, cpu)| (name.clone(), cpu - start.get(name).copied().unwrap_or(0.0)))
        .collect()
}

fn peak_rss(samples: &[&Sample]) -> BTreeMap<String, f64> {
    let mut peaks = BTreeMap::new();
    for sample in samples {
        for (name, rss) in &sample.rss_mb {
            let peak = peaks.entry(name.clone()).or_insert(0.0_f64);
            *peak = peak.max(*rss);
        }
    }
    peaks
}

/// The simulated nodes stand for kubelets on other machines: not part
/// of the control plane's memory.
const NODES_PROCESS: &str = "capstan-nodes";

fn total_rss(samples: &[&Sample]) -> (f64, f64, f64) {
    let control_plane = |s: &&Sample| -> f64 {
        s.rss_mb
            .iter()
            .filter(|(name, _)| name.as_str() != NODES_PROCESS)
            .map(|(_, rss)| rss)
            .sum()
    };
    let totals: Vec<f64> = samples.iter().map(control_plane).collect();
    let first = totals.first().copied().unwrap_or(0.0);
    let last = totals.last().copied().unwrap_or(0.0);
    (first, last, totals.iter().copied().fold(0.0, f64::max))
}

fn deepest(samples: &[&Sample]) -> BTreeMap<String, f64> {
    let mut deepest = BTreeMap::new();
    for sample in samples {
        for (name, depth) in &sample.queues {
            let most = deepest.entry(name.clone()).or_insert(0.0_f64);
            *most = most.max(*depth);
        }
    }
    deepest.retain(|_, depth| *depth > 0.0);
    deepest
}

/// The longest time after `since` between two moments the Ready count grew.
fn longest_stall(series: &[(f64, usize)], since: f64) -> f64 {
    let mut longest = 0.0_f64;
    let mut last_growth = since;
    let mut previous = None;
    for (at, count) in series {
        let grew = previous.is_some_and(|before| *count > before);
        previous = Some(*count);
        if *at < since || !grew {
            continue;
        }
        longest = longest.max(at - last_growth);
        last_growth = *at;
    }
    longest
}

/// The targets for a 1,000-node, 30,000-pod run on 2 cores.
fn targets(report: &Report) -> Vec<Target> {
    let mut out = Vec::new();
    let mut add = |what: &str, target: &str, measured: String, met: bool| {
        out.push(Target {
            what: what.into(),
            target: target.into(),
            measured,
            met,
        })
    };
    let nodes = report.nodes_ready_s;
    add(
        "nodes Ready",
        "<= 20 s",
        seconds(nodes),
        nodes.is_some_and(|s| s <= 20.0),
    );
    let pods = report.pods_ready_s;
    add(
        "pods Ready",
        "<= 150 s",
        seconds(pods),
        pods.is_some_and(|s| s <= 150.0),
    );
    for phase in report
        .phases
        .iter()
        .filter(|p| p.name == "ramp" || p.name == "churn")
    {
        let p99 = phase.startup_stamped.p99_ms;
        add(
            &format!("{}: pod startup p99", phase.name),
            "<= 5 s",
            format!("{p99} ms"),
            p99 <= 5000,
        );
        for row in &phase.probe {
            let what = format!("{}: {} p99", phase.name, row.kind);
            let target = format!("<= {} s", row.slo_ms / 1000);
            add(
                &what,
                &target,
                format!("{} ms", row.latency.p99_ms),
                row.held,
            );
        }
        let peak = phase.total_rss_mb.2;
        add(
            &format!("{}: RSS of the control plane", phase.name),
            "<= 1 GB",
            format!("{peak:.0} MB"),
            peak <= 1000.0,
        );
    }
    if let Some(churn) = report.phases.iter().find(|p| p.name == "churn") {
        let (start, end, _) = churn.total_rss_mb;
        let growth = end - start;
        add(
            "churn: RSS flat",
            "grows < 10%",
            format!("{start:.0} -> {end:.0} MB"),
            growth < start * 0.1,
        );
    }
    out
}

fn seconds(value: Option<f64>) -> String {
    value.map_or("not reached".into(), |s| format!("{s:.1} s"))
}

/// The per-phase table.
pub fn table(report: &Report) -> String {
    let mut out = format!(
        "density ({}; {} nodes, {} Deployments x {}, client QPS {}{}): nodes Ready in {}, pods Ready in {} ({}/s)\n",
        report.shape,
        report.nodes,
        report.deployments,
        report.replicas,
        report.client_qps,
        if report.controller_qps == report.client_qps {
            String::new()
        } else {
            format!(", controller manager {}", report.controller_qps)
        },
        seconds(report.nodes_ready_s),
        seconds(report.pods_ready_s),
        report.pods_per_s.map_or("-".into(), |r| format!("{r:.0}")),
    );
    out.push_str(&format!(
        "{:<7} {:>7} {:>8} {:>16} {:>16} {:>19} {:>11} {:>9} {:>8}\n",
        "phase",
        "wall s",
        "Ready/s",
        "startup p50/p99",
        "stamped p50/p99",
        "probe p99 m/g/n/c",
        "CPU s",
        "RSS MB",
        "store MB"
    ));
    for phase in &report.phases {
        let probe: Vec<String> = phase
            .probe
            .iter()
            .map(|r| r.latency.p99_ms.to_string())
            .collect();
        out.push_str(&format!(
            "{:<7} {:>7.1} {:>8.0} {:>16} {:>16} {:>19} {:>11.1} {:>9.0} {:>8.1}\n",
            phase.name,
            phase.wall_s,
            phase.ready_per_s,
            format!(
                "{}/{} ms",
                phase.startup_watched.p50_ms, phase.startup_watched.p99_ms
            ),
            format!(
                "{}/{} ms",
                phase.startup_stamped.p50_ms, phase.startup_stamped.p99_ms
            ),
            probe.join("/"),
            phase.cpu_s.values().sum::<f64>(),
            phase.total_rss_mb.2,
            phase.store_mb,
        ));
        let cpu: Vec<String> = phase
            .cpu_s
            .iter()
            .map(|(n, s)| format!("{n} {s:.1}"))
            .collect();
        let rss: Vec<String> = phase
            .peak_rss_mb
            .iter()
            .map(|(n, m)| format!("{n} {m:.0}"))
            .collect();
        out.push_str(&format!(
            "        CPU s: {}; peak RSS MB: {}\n",
            cpu.join(", "),
            rss.join(", ")
        ));
        if !phase.deepest_queues.is_empty() {
            let queues: Vec<String> = phase
                .deepest_queues
                .iter()
                .map(|(n, d)| format!("{n} {d}"))
                .collect();
            out.push_str(&format!("        deepest queues: {}\n", queues.join(", ")));
        }
    }
    if let Some(tenant) = &report.noisy_tenant {
        out.push_str(&tenant.line());
    }
    if let Some(failover) = &report.failover {
        out.push_str(&format!(
            "failover: controllers' API server killed at {:.1} s with {} pods Ready; another controller manager led {} later; longest stall in Ready pods {:.1} s\n",
            failover.killed_at_s,
            failover.ready_when_killed,
            failover.new_leader_after_s.map_or("(not seen)".into(), |s| format!("{s:.1} s")),
            failover.longest_stall_s
        ));
    }
    out.push_str("startup: creation to Ready as the bench's watch saw it; stamped: the pods' creationTimestamp to their Ready condition; probe m/g/n/c: mutating, get, namespace list, cluster list (ms); CPU: all processes; RSS: the control plane's peak, the simulated nodes apart\n");
    out
}

pub fn targets_table(report: &Report) -> String {
    let mut out = String::from("density targets (a 1,000-node, 30,000-pod run on 2 cores)\n");
    for target in &report.targets {
        out.push_str(&format!(
            "  {:<34} {:>10} {:>22}  {}\n",
            target.what,
            target.target,
            target.measured,
            if target.met { "met" } else { "MISSED" }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_is_the_longest_time_without_growth() {
        let series = [(0.0, 0), (1.0, 10), (2.0, 20), (9.0, 21), (10.0, 30)];
        assert_eq!(longest_stall(&series, 1.5), 7.0);
        assert_eq!(longest_stall(&series, 0.0), 7.0);
    }
}
