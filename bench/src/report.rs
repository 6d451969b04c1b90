//! Statistics of each run, the capstan/etcd ratios, the printed table and
//! the JSON file.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::apiserver::{ApiRatio, ApiStats};
use crate::checks::Checks;
use crate::run_spec::{RunOutcome, Workload};
use crate::servers::ServerKind;

/// The summary of one (server, workload, clients) run.
#[derive(Debug, Clone, Serialize)]
pub struct RunStats {
    pub server: ServerKind,
    pub workload: Workload,
    pub clients: usize,
    /// The cores the server was pinned to (`--cores`); null when unpinned.
    pub cores: Option<usize>,
    pub conns: usize,
    pub ok: u64,
    pub errors: u64,
    pub elapsed_s: f64,
    pub ops_per_sec: f64,
    pub mean_us: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    /// Server CPU seconds (all its processes) while the clients ran.
    pub server_cpu_s: Option<f64>,
    /// Server CPU seconds per 1,000 successful operations.
    pub cpu_s_per_1k_ops: Option<f64>,
    /// The server process with the busiest thread: its CPU in cores, the
    /// thread's name and its CPU in cores (1.0 = a whole core).
    pub process_cores: Option<f64>,
    pub busiest_thread: Option<String>,
    pub busiest_thread_cores: Option<f64>,
    /// Context switches of every server thread per successful operation.
    pub context_switches_per_op: Option<f64>,
    /// That process's busiest threads, most first: name and cores.
    pub top_threads: Vec<(String, f64)>,
}

impl RunStats {
    pub fn from_outcome(outcome: &RunOutcome) -> Self {
        let hist = &outcome.latency_us;
        let seconds = outcome.elapsed.as_secs_f64();
        let empty = hist.is_empty();
        let quantile = |q: f64| if empty { 0 } else { hist.value_at_quantile(q) };
        let used = outcome.server_use.as_ref();
        let server_cpu_s = used.map(|u| u.cpu_s);
        let per_op = |total: f64| (outcome.ok > 0).then(|| total / outcome.ok as f64);
        RunStats {
            server: outcome.spec.server,
            workload: outcome.spec.workload,
            clients: outcome.spec.clients,
            cores: outcome.spec.cores,
            conns: outcome.conns,
            ok: outcome.ok,
            errors: outcome.errors,
            elapsed_s: seconds,
            ops_per_sec: if seconds > 0.0 {
                outcome.ok as f64 / seconds
            } else {
                0.0
            },
            mean_us: if empty { 0.0 } else { hist.mean() },
            p50_us: quantile(0.50),
            p99_us: quantile(0.99),
            p999_us: quantile(0.999),
            max_us: if empty { 0 } else { hist.max() },
            server_cpu_s,
            cpu_s_per_1k_ops: server_cpu_s.and_then(|cpu| per_op(cpu * 1000.0)),
            process_cores: used.map(|u| u.busiest.process_cores),
            busiest_thread: used.map(|u| u.busiest.busiest_thread.clone()),
            busiest_thread_cores: used.map(|u| u.busiest.busiest_thread_cores),
            context_switches_per_op: used.and_then(|u| per_op(u.context_switches as f64)),
            top_threads: used.map_or(Vec::new(), |u| u.busiest.top_threads.clone()),
        }
    }

    /// A thread of this run above [`SERIAL_CEILING`] of a core while its
    /// process used less than the cores it had: a serial ceiling.
    pub fn serial_ceiling(&self, machine_cores: usize) -> Option<String> {
        let thread = self.busiest_thread_cores?;
        let process = self.process_cores?;
        let cores = self.cores.unwrap_or(machine_cores) as f64;
        (thread > SERIAL_CEILING && process < cores * SERIAL_CEILING).then(|| {
            format!(
                "WARNING: {} {} clients={}{}: thread `{}` of {} used {:.0}% of a core while \
                 the process used {:.2} of {} cores: one thread is the ceiling",
                self.server,
                self.workload,
                self.clients,
                self.cores.map_or(String::new(), |n| format!(" cores={n}")),
                self.busiest_thread.as_deref().unwrap_or("?"),
                self.server,
                thread * 100.0,
                process,
                cores
            )
        })
    }
}

/// A thread above this share of a core is taken for saturated.
pub const SERIAL_CEILING: f64 = 0.8;

/// capstan relative to etcd for one (workload, clients), from the same run.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    pub workload: Workload,
    pub clients: usize,
    pub cores: Option<usize>,
    /// capstan ops/s ÷ etcd ops/s: above 1 means capstan is faster.
    pub throughput: f64,
    /// capstan p99 ÷ etcd p99: above 1 means capstan's tail is slower.
    pub p99: f64,
    /// capstan CPU per operation ÷ etcd's: below 1 means capstan is cheaper.
    pub cpu_per_op: f64,
}

pub fn ratios(stats: &[RunStats]) -> Vec<Ratio> {
    let mut out = Vec::new();
    for capstan in stats.iter().filter(|s| s.server == ServerKind::Capstan) {
        let etcd = stats.iter().find(|s| {
            s.server == ServerKind::Etcd
                && s.workload == capstan.workload
                && s.clients == capstan.clients
                && s.cores == capstan.cores
        });
        if let Some(etcd) = etcd {
            out.push(Ratio {
                workload: capstan.workload,
                clients: capstan.clients,
                cores: capstan.cores,
                throughput: divide(capstan.ops_per_sec, etcd.ops_per_sec),
                p99: divide(capstan.p99_us as f64, etcd.p99_us as f64),
                cpu_per_op: match (capstan.cpu_s_per_1k_ops, etcd.cpu_s_per_1k_ops) {
                    (Some(c), Some(e)) => divide(c, e),
                    _ => f64::NAN,
                },
            });
        }
    }
    out
}

fn divide(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

fn times(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}x")
    } else {
        "-".into()
    }
}

/// The results table: one row per run, grouped by workload and client
/// count, capstan's rows carrying the capstan/etcd ratios. `proc` is the
/// CPU of the server process with the busiest thread, in cores; `busiest
/// thread` that thread's share of a core and its name.
pub fn table(stats: &[RunStats]) -> String {
    let ratios = ratios(stats);
    let mut rows: Vec<&RunStats> = stats.iter().collect();
    rows.sort_by_key(|s| (s.workload as u8, s.clients, s.cores, s.server as u8));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<8} {:>7} {:>5} {:>5} {:<8} {:>9} {:>10} {:>8} {:>8} {:>8} {:>8} {:>6} {:>9} {:>9} {:>9} {:>9} {:>5} {:<20} {:>8}",
        "workload",
        "clients",
        "conns",
        "cores",
        "server",
        "requests",
        "ops/s",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "errors",
        "ops/s c/e",
        "p99 c/e",
        "cpu s/1k",
        "cpu c/e",
        "proc",
        "busiest thread",
        "ctxsw/op"
    );
    for s in rows {
        let ratio = (s.server == ServerKind::Capstan)
            .then(|| {
                ratios.iter().find(|r| {
                    r.workload == s.workload && r.clients == s.clients && r.cores == s.cores
                })
            })
            .flatten();
        out.push_str(&row(s, ratio));
    }
    out
}

fn row(s: &RunStats, ratio: Option<&Ratio>) -> String {
    let or_dash = |value: Option<String>| value.unwrap_or_else(|| "-".into());
    let thread = s
        .busiest_thread_cores
        .zip(s.busiest_thread.as_ref())
        .map(|(cores, name)| format!("{:>3.0}% {name}", cores * 100.0));
    format!(
        "{:<8} {:>7} {:>5} {:>5} {:<8} {:>9} {:>10.1} {:>8} {:>8} {:>8} {:>8} {:>6} {:>9} {:>9} {:>9} {:>9} {:>5} {:<20} {:>8}\n",
        s.workload.to_string(),
        s.clients,
        s.conns,
        or_dash(s.cores.map(|n| n.to_string())),
        s.server.name(),
        s.ok,
        s.ops_per_sec,
        ms(s.p50_us),
        ms(s.p99_us),
        ms(s.p999_us),
        ms(s.max_us),
        s.errors,
        ratio.map_or("-".into(), |r| times(r.throughput)),
        ratio.map_or("-".into(), |r| times(r.p99)),
        or_dash(s.cpu_s_per_1k_ops.map(|cpu| format!("{cpu:.3}"))),
        ratio.map_or("-".into(), |r| times(r.cpu_per_op)),
        or_dash(s.process_cores.map(|cores| format!("{cores:.2}"))),
        or_dash(thread),
        or_dash(s.context_switches_per_op.map(|n| format!("{n:.2}"))),
    )
}

#[derive(Serialize)]
struct JsonReport<'a> {
    duration_s: f64,
    value_size: usize,
    clients: &'a [usize],
    max_conns: usize,
    results: &'a [RunStats],
    ratios: Vec<Ratio>,
    api_clients: usize,
    api_list_size: usize,
    /// capstan-apiserver on capstan-store and on etcd, per request kind.
    apiserver: &'a [ApiStats],
    /// On capstan-store ÷ on etcd; NaN (no etcd row) is written as null.
    apiserver_ratios: Vec<ApiRatio>,
    checks_passed: usize,
    checks_failed: usize,
    checks: &'a [crate::checks::Check],
}

pub struct JsonContext<'a> {
    pub duration: Duration,
    pub value_size: usize,
    pub clients: &'a [usize],
    pub max_conns: usize,
    pub api_clients: usize,
    pub api_list_size: usize,
}

pub fn write_json(
    path: &Path,
    context: &JsonContext<'_>,
    stats: &[RunStats],
    api_stats: &[ApiStats],
    checks: &Checks,
) -> Result<(), String> {
    let report = JsonReport {
        duration_s: context.duration.as_secs_f64(),
        value_size: context.value_size,
        clients: context.clients,
        max_conns: context.max_conns,
        results: stats,
        // NaN is not JSON; serde_json writes it as null.
        ratios: ratios(stats),
        api_clients: context.api_clients,
        api_list_size: context.api_list_size,
        apiserver: api_stats,
        apiserver_ratios: crate::apiserver::ratios(api_stats),
        checks_passed: checks.passed(),
        checks_failed: checks.failed(),
        checks: checks.all(),
    };
    let text =
        serde_json::to_string_pretty(&report).map_err(|err| format!("encode JSON: {err}"))?;
    std::fs::write(path, text + "\n").map_err(|err| format!("write {}: {err}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(thread: f64, process: f64, cores: Option<usize>) -> RunStats {
        RunStats {
            server: ServerKind::Capstan,
            workload: Workload::Put,
            clients: 512,
            cores,
            conns: 64,
            ok: 1000,
            errors: 0,
            elapsed_s: 1.0,
            ops_per_sec: 1000.0,
            mean_us: 1.0,
            p50_us: 1,
            p99_us: 1,
            p999_us: 1,
            max_us: 1,
            server_cpu_s: Some(process),
            cpu_s_per_1k_ops: Some(process),
            process_cores: Some(process),
            busiest_thread: Some("serve-0".into()),
            busiest_thread_cores: Some(thread),
            context_switches_per_op: Some(0.5),
            top_threads: Vec::new(),
        }
    }

    #[test]
    fn a_saturated_thread_on_an_idle_machine_is_a_serial_ceiling() {
        let warning = run(0.95, 1.1, None).serial_ceiling(4).expect("a warning");
        assert!(
            warning.contains("serve-0") && warning.contains("95%"),
            "{warning}"
        );
        // Every core busy: the machine is the limit, not the thread.
        assert!(run(0.95, 3.9, None).serial_ceiling(4).is_none());
        // Pinned to one core, one busy thread is the whole machine.
        assert!(run(0.95, 0.97, Some(1)).serial_ceiling(4).is_none());
        assert!(run(0.5, 0.6, None).serial_ceiling(4).is_none());
    }
}
