//! The timed store workloads, in the order that keeps the comparison
//! fair: for every core count (`--cores`, the servers pinned to the same
//! cores), every client count, every server, every workload. The two
//! servers' runs for one client count are next to each other in time, so
//! the machine's noise affects both alike.

use std::time::Duration;

use crate::checks::Checks;
use crate::cli::Args;
use crate::report::RunStats;
use crate::run_spec::RunSpec;
use crate::servers::{ServerKind, ServerProcess};
use crate::{cpu, leader, workload};

/// Runs every store workload in that order; a row per run goes to `stats`.
pub async fn run_workloads(
    args: &Args,
    servers: &mut [ServerProcess],
    checks: &mut Checks,
    stats: &mut Vec<RunStats>,
) -> Result<(), String> {
    let mut run_id = 0;
    let mut dead: Vec<ServerKind> = Vec::new();
    let core_counts: Vec<Option<usize>> = match &args.cores {
        Some(counts) => counts.0.iter().copied().map(Some).collect(),
        None => vec![None],
    };
    for cores in core_counts {
        if let Some(count) = cores {
            pin(servers, count, checks, args)?;
        }
        for &clients in &args.clients.0 {
            for server in servers.iter_mut() {
                for &workload in &args.store_workloads.0 {
                    if dead.contains(&server.kind) {
                        continue;
                    }
                    run_id += 1;
                    let spec = RunSpec {
                        server: server.kind,
                        endpoint: server.endpoint(),
                        workload,
                        clients,
                        max_conns: args.max_conns,
                        duration: args.duration,
                        value_size: args.value_size,
                        request_timeout: args.request_timeout,
                        progress: !args.quiet,
                        run_id,
                        cores,
                    };
                    if let Some(row) = run_one(args, server, spec, checks, &mut dead).await {
                        stats.push(row);
                    }
                }
            }
        }
    }
    Ok(())
}

/// Restarts every server pinned to the first `count` cores this process
/// may use.
fn pin(
    servers: &mut [ServerProcess],
    count: usize,
    checks: &mut Checks,
    args: &Args,
) -> Result<(), String> {
    let cores: Vec<usize> = cpu::allowed_cores()?.into_iter().take(count).collect();
    if !args.quiet {
        eprintln!("restarting the servers pinned to cores {cores:?}");
    }
    for server in servers.iter_mut() {
        let pinned = server.restart_pinned(&cores, args.startup_timeout);
        let name = format!("{}: pinned to {count} cores", server.kind);
        let ok = pinned.is_ok();
        checks.record(
            name,
            ok,
            pinned.err().unwrap_or_else(|| format!("{cores:?}")),
        );
        if !ok {
            return Err(format!("cannot pin {} to {cores:?}", server.kind));
        }
    }
    Ok(())
}

/// One workload on one server, after checking the server still runs (a
/// dead one is noted in `dead` and skipped from then on).
async fn run_one(
    args: &Args,
    server: &mut ServerProcess,
    spec: RunSpec,
    checks: &mut Checks,
    dead: &mut Vec<ServerKind>,
) -> Option<RunStats> {
    let (workload, clients) = (spec.workload, spec.clients);
    if let Some(status) = server.exit_status() {
        checks.record(
            format!(
                "{}: still running before {workload} clients={clients}",
                server.kind
            ),
            false,
            format!("exited: {status}; log tail:\n{}", server.log_tail(20)),
        );
        dead.push(server.kind);
        return None;
    }
    if args.members > 1 {
        place_leader(server, checks, !args.quiet).await;
    }
    let label = spec.label();
    if !args.quiet {
        eprintln!("running {label} for {:?}", args.duration);
    }
    match workload::run(spec, checks, || server.cpu_samples()).await {
        Ok(outcome) => {
            let row = RunStats::from_outcome(&outcome);
            if !args.quiet {
                eprintln!(
                    "done {label}: {} ok, {} errors, {:.1} ops/s, p50 {:.3} ms, p99 {:.3} ms",
                    row.ok,
                    row.errors,
                    row.ops_per_sec,
                    row.p50_us as f64 / 1000.0,
                    row.p99_us as f64 / 1000.0
                );
            }
            Some(row)
        }
        Err(err) => {
            checks.record(format!("{label}: workload ran"), false, err);
            None
        }
    }
}

/// Puts the leader of a cluster on the first member, the one the timed
/// clients talk to (see [`leader`]); a failure is a failed check, and the
/// run goes on wherever the leader is.
async fn place_leader(server: &ServerProcess, checks: &mut Checks, progress: bool) {
    let limit = Duration::from_secs(10);
    let check = format!("{}: the first member takes the lead", server.kind);
    match leader::lead_from_first(&server.endpoints(), limit).await {
        Ok(false) => {}
        Ok(true) => {
            if progress {
                eprintln!("moved {}'s leader to the first member", server.kind);
            }
            checks.record(check, true, "moved");
        }
        Err(err) => {
            checks.record(check, false, err);
        }
    }
}
