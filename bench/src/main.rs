//! `capstan-bench`: capstan-store next to a real etcd, both started by the
//! benchmark itself and measured in the same run, with correctness checks
//! along the way: puts and linearizable gets on the etcd API, then gets,
//! lists and creates through a capstan-apiserver on each.
//!
//! - [`cli`]: flags and their parsing;
//! - [`servers`]: the servers under test as child processes (killed on drop),
//!   and [`health`]: whether they answer;
//! - [`workload`]: concurrent clients over a shared connection pool, and the
//!   checks of what they did against the server's state ([`txn`], [`verify`]);
//!   [`run_spec`] says what a run is and what its clients bring back, and
//!   [`client`] connects and bounds requests;
//! - [`report`]: per-run statistics, capstan/etcd ratios, table and JSON;
//! - [`apiserver`]: capstan-apiserver on each store: get, list, create;
//! - [`checks`]: the ledger behind the final `N passed, M failed` line;
//! - [`fanout`]: many watchers on one prefix, delivery latency per event;
//! - [`scale`]: many keys, then what a large store costs; [`churn`]: memory
//!   under overwrites and compaction; [`catch_up`]: a member added after it;
//! - [`plot`] and [`compare`]: the picture of a run, and a run next to an
//!   earlier one's JSON; [`scaling`]: the runs by core count (`--cores`);
//! - [`cpu`]: CPU per process and per thread, and pinning to cores;
//!   [`store_runs`]: the store workloads in order, pinned per core count;
//! - [`density`]: nodes, Deployments, churn and deletion on a fresh
//!   control plane, measured against SIG-scalability's SLOs;
//! - [`scheduling`]: capstan-scheduler and capstan-nodes against a fresh
//!   `capstan` (`--workload scheduler`, `--workload heartbeats`).

/// The load generator shares the machine's cores with the servers it
/// measures, and every request allocates (HTTP/2 frames, protobuf
/// messages); glibc's malloc and free were 9% of its CPU at 256 putting
/// clients. The same allocator as capstan-store's, for the same reason.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod apiserver;
mod catch_up;
mod checks;
mod churn;
mod cli;
mod client;
mod compare;
mod cpu;
mod density;
mod fanout;
mod grpc;
mod health;
mod leader;
mod plot;
mod report;
mod run_spec;
mod scale;
mod scaling;
mod scheduling;
mod servers;
mod store_runs;
mod txn;
mod verify;
mod watch_stream;
mod workload;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::apiserver::ApiStats;
use crate::checks::Checks;
use crate::cli::Args;
use crate::report::RunStats;
use crate::servers::{ServerKind, ServerProcess};

fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(err) = args.validate() {
        eprintln!("capstan-bench: {err}");
        return ExitCode::from(2);
    }
    let mut checks = Checks::new(args.quiet);
    let mut stats = Vec::new();
    let mut api_stats = Vec::new();
    let mut cache_stats = Vec::new();
    let mut fanouts = Vec::new();
    let mut scales = Vec::new();
    let ran = match args.workload.as_str() {
        "scheduler" => args
            .scheduling_config()
            .and_then(|config| scheduling::run_scheduler(&config, &mut checks)),
        "heartbeats" => scheduling::run_heartbeats(&args.heartbeat_config(), &mut checks),
        "density" => args
            .density_config()
            .and_then(|config| density::run(&config, &mut checks)),
        _ => run(
            &args,
            &mut checks,
            &mut stats,
            &mut api_stats,
            &mut cache_stats,
            &mut fanouts,
            &mut scales,
        ),
    };
    if let Err(err) = ran {
        checks.record("benchmark ran to the end", false, err);
    }

    print_store_results(&args, &stats);
    if !fanouts.is_empty() {
        print!("{}", fanout::table(&fanouts));
    }
    if !scales.is_empty() {
        print!("{}", scale::table(&scales));
    }
    print_api_results(&args, &api_stats);
    if !cache_stats.is_empty() {
        print!("{}", apiserver::cache_table(&cache_stats));
    }
    // The density run writes its own JSON there.
    if let Some(path) = args.json.as_ref().filter(|_| args.workload != "density") {
        write_json(&args, path, &stats, &api_stats, &mut checks);
    }
    if let Some(path) = args.plot.as_ref().filter(|_| !stats.is_empty()) {
        let title = format!(
            "capstan-store and etcd: {} member(s), {}-byte values, {:?} per run",
            args.members, args.value_size, args.duration
        );
        match plot::write_svg(path, &stats, &title) {
            Ok(()) => println!("plot: {}", path.display()),
            Err(err) => {
                checks.record("plot written", false, err);
            }
        }
    }
    if let Some(path) = args.scaling_plot.as_ref().filter(|_| !stats.is_empty()) {
        match scaling::write_svg(path, &stats, args.members) {
            Ok(()) => println!("scaling plot: {}", path.display()),
            Err(err) => {
                checks.record("scaling plot written", false, err);
            }
        }
    }
    if let Some(path) = args.compare.as_ref().filter(|p| p.exists()) {
        match compare::table(&stats, path) {
            Ok(table) => print!("{table}"),
            Err(err) => println!("no comparison: {err}"),
        }
    }
    for failure in checks.failures() {
        println!("FAILED: {}: {}", failure.name, failure.detail);
    }
    println!("{} passed, {} failed", checks.passed(), checks.failed());
    if checks.failed() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn print_store_results(args: &Args, stats: &[RunStats]) {
    if stats.is_empty() {
        return;
    }
    println!(
        "capstan-bench: {} member(s) per server, {:?} per workload, {}-byte values, clients {}, at most {} connections per workload",
        args.members,
        args.duration,
        args.value_size,
        args.clients.0.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(","),
        args.max_conns
    );
    print!("{}", report::table(stats));
    if stats.iter().any(|s| s.server == ServerKind::Etcd) {
        println!(
            "c/e = capstan/etcd from this run: ops/s above 1 is faster, p99 above 1 is slower"
        );
    }
    println!(
        "proc = CPU of the server process with the busiest thread, in cores; busiest thread = \
         that thread's share of one core"
    );
    let machine_cores = cpu::allowed_cores().map_or(1, |cores| cores.len());
    for warning in stats.iter().filter_map(|s| s.serial_ceiling(machine_cores)) {
        println!("{warning}");
    }
    if args.cores.as_ref().is_some_and(|cores| cores.0.len() > 1) {
        print!("{}", scaling::table(stats));
    }
}

fn print_api_results(args: &Args, api_stats: &[ApiStats]) {
    if api_stats.is_empty() {
        return;
    }
    println!(
        "capstan-apiserver on each store: {} clients, {:?} per request kind, lists of {} ConfigMaps",
        args.api_clients, args.duration, args.api_list_size
    );
    print!("{}", apiserver::table(api_stats));
    if api_stats.iter().any(|s| s.backend == ServerKind::Etcd) {
        println!(
            "c/e = on capstan-store / on etcd, same API server, this run: \
             req/s above 1 is faster, p50 and p99 above 1 are slower"
        );
    }
}

fn write_json(
    args: &Args,
    path: &std::path::Path,
    stats: &[RunStats],
    api_stats: &[ApiStats],
    checks: &mut Checks,
) {
    let context = report::JsonContext {
        duration: args.duration,
        value_size: args.value_size,
        clients: &args.clients.0,
        max_conns: args.max_conns,
        api_clients: args.api_clients,
        api_list_size: args.api_list_size,
    };
    match report::write_json(path, &context, stats, api_stats, checks) {
        Ok(()) if !args.quiet => eprintln!("wrote {}", path.display()),
        Ok(()) => {}
        Err(err) => {
            checks.record("JSON report written", false, err);
        }
    }
}

/// Starts the servers (on the main thread, see `servers::die_with_parent`),
/// runs every workload, checks the servers survived. The servers are killed
/// when `servers` drops, however this returns.
fn run(
    args: &Args,
    checks: &mut Checks,
    stats: &mut Vec<RunStats>,
    api_stats: &mut Vec<ApiStats>,
    cache_stats: &mut Vec<apiserver::CacheStats>,
    fanouts: &mut Vec<fanout::FanoutStats>,
    scales: &mut Vec<scale::ScaleStats>,
) -> Result<(), String> {
    let say = |line: String| {
        if !args.quiet {
            eprintln!("{line}");
        }
    };
    let mut kinds = vec![(ServerKind::Capstan, args.store_bin()?)];
    if !args.skip_etcd {
        kinds.push((ServerKind::Etcd, args.etcd_bin.clone()));
    }
    let mut servers: Vec<ServerProcess> = Vec::new();
    for (kind, binary) in kinds {
        say(format!("starting {kind} from {}", binary.display()));
        match ServerProcess::start(kind, &binary, args.startup_timeout, args.members) {
            Ok(server) => {
                checks.record(
                    format!("{kind}: starts and reports healthy"),
                    true,
                    format!("serving on {}", server.endpoint()),
                );
                servers.push(server);
            }
            Err(err) => {
                // Recorded as the failed check; nothing else can run.
                checks.record(format!("{kind}: starts and reports healthy"), false, err);
                return Ok(());
            }
        }
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|err| format!("start the async runtime: {err}"))?;
    if args.runs_store() {
        // The timed store workloads share the machine's cores with the server
        // they measure. On one thread the clients need a quarter less CPU per
        // request than on the work-stealing runtime (no wake-ups across
        // threads) and stay below one core at 28,000 puts/s.
        let workloads_runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| format!("start the async runtime: {err}"))?;
        workloads_runtime.block_on(until_signal(store_runs::run_workloads(
            args,
            &mut servers,
            checks,
            stats,
        )))??;
        if args.watchers > 0 {
            *fanouts = runtime.block_on(until_signal(run_fanouts(args, &servers, checks)))?;
        }
    }
    // Started only now, so their background work (leases, reconcilers)
    // does not run during the store workloads, and from the main thread
    // for the same reason as the servers. Declared after
    // the runtime: dropped (killed) first, whatever path this returns by.
    let mut backends = Vec::new();
    if args.runs_apiserver() {
        let binary = args.apiserver_bin()?;
        if args.api_rbac {
            apiserver::rbac::enable(&args.api_authorization_mode);
        }
        if let Some(level) = &args.api_audit_level {
            apiserver::audit::enable(level);
        }
        if let Some(provider) = &args.api_encryption {
            apiserver::encryption::enable(provider);
        }
        if args.api_webhook {
            apiserver::webhook::enable();
        }
        backends = apiserver::start_backends(&binary, &servers, args.startup_timeout, checks);
        let config = args.api_config();
        let runs = apiserver::run_all(&config, &mut backends, checks, api_stats, cache_stats);
        runtime.block_on(until_signal(runs))?;
        apiserver::check_logs(&backends, checks);
    }
    // Last, so a large store does not slow the other workloads.
    if args.runs_store() && args.scale_keys > 0 {
        for server in servers.iter_mut() {
            scales.extend(run_scale(args, &runtime, server, checks));
        }
    }
    // Clients go before the servers do.
    drop(runtime);
    drop(backends);

    for server in &mut servers {
        let kind = server.kind;
        let status = server.exit_status();
        let healthy = status.is_none() && server.healthy_now();
        checks.record(
            format!("{kind}: still running and healthy after the workloads"),
            healthy,
            match status {
                Some(status) => format!("exited: {status}; log tail:\n{}", server.log_tail(20)),
                None if healthy => "ok".to_string(),
                None => "running, but /health is not true".to_string(),
            },
        );
        let alarms = server.log_alarms();
        checks.record(
            format!("{kind}: log shows no panic or fatal error"),
            alarms.is_empty(),
            if alarms.is_empty() {
                "clean".to_string()
            } else {
                alarms.join("\n")
            },
        );
    }
    Ok(())
}

/// The scale run on one server: load and reads, then a kill -9 and a
/// restart, after which every key must still be there.
fn run_scale(
    args: &Args,
    runtime: &tokio::runtime::Runtime,
    server: &mut ServerProcess,
    checks: &mut Checks,
) -> Option<scale::ScaleStats> {
    let (kind, keys) = (server.kind, args.scale_keys);
    if !args.quiet {
        eprintln!("running {kind} scale run: {keys} keys");
    }
    let loaded = scale::load_and_read(
        server,
        keys,
        args.value_size,
        args.request_timeout,
        !args.quiet,
    );
    let mut stats = match runtime.block_on(loaded) {
        Ok(stats) => stats,
        Err(err) => {
            checks.record(
                format!("{kind}: scale run loaded and read {keys} keys"),
                false,
                err,
            );
            return None;
        }
    };
    checks.record(
        format!("{kind}: scale run loaded and read {keys} keys"),
        true,
        "ok",
    );
    let churn = churn::rounds(server, keys, args.value_size, args.request_timeout);
    match runtime.block_on(churn) {
        Ok(rss) => stats.rss_by_round = rss,
        Err(err) => {
            checks.record(format!("{kind}: overwrite-and-compact rounds"), false, err);
        }
    }
    scale_restart(args, runtime, server, checks, &mut stats);
    let joined = catch_up::add_member(server, args.request_timeout, CATCH_UP_LIMIT);
    let name = format!("{kind}: a member added after the scale run catches up");
    match runtime.block_on(joined) {
        Ok(caught) => {
            checks.record(name, true, format!("revision {}", caught.revision));
            stats.catch_up = Some(caught);
        }
        Err(err) => {
            checks.record(name, false, err);
        }
    }
    Some(stats)
}

/// Longest a member added after the scale run may take to catch up.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(600);

/// A kill -9 and a restart, after which every scale key must be there.
fn scale_restart(
    args: &Args,
    runtime: &tokio::runtime::Runtime,
    server: &mut ServerProcess,
    checks: &mut Checks,
    stats: &mut scale::ScaleStats,
) {
    let keys = args.scale_keys;
    let name = format!(
        "{}: every scale key is there after kill -9 and restart",
        server.kind
    );
    match server.restart_first(args.startup_timeout) {
        Ok(took) => stats.restart_s = Some(took.as_secs_f64()),
        Err(err) => {
            checks.record(name, false, err);
            return;
        }
    }
    match runtime.block_on(scale::count_keys(server, args.request_timeout)) {
        Ok(found) => {
            stats.keys_after_restart = Some(found);
            checks.record(name, found == keys as i64, format!("{found} of {keys}"));
        }
        Err(err) => {
            checks.record(name, false, err);
        }
    }
}

/// The watch fan-out workload on each server in turn.
async fn run_fanouts(
    args: &Args,
    servers: &[ServerProcess],
    checks: &mut Checks,
) -> Vec<fanout::FanoutStats> {
    let mut results = Vec::new();
    for server in servers {
        if !args.quiet {
            eprintln!(
                "running {} watch fan-out: {} watchers",
                server.kind, args.watchers
            );
        }
        let spec = fanout::FanoutSpec {
            server: server.kind,
            endpoint: server.endpoint(),
            watchers: args.watchers,
            writes_per_sec: args.watch_rate,
            duration: args.duration,
            request_timeout: args.request_timeout,
        };
        let name = format!(
            "{}: every watcher saw every put once, in order",
            server.kind
        );
        match fanout::run(spec, || server.cpu_seconds()).await {
            Ok(stats) => {
                let detail = format!(
                    "{} of {} watchers incomplete; {} events delivered of {}",
                    stats.incomplete_watchers,
                    stats.watchers,
                    stats.delivered,
                    stats.writes * stats.watchers as u64
                );
                checks.record(
                    name,
                    stats.incomplete_watchers == 0 && stats.writes > 0,
                    detail,
                );
                results.push(stats);
            }
            Err(err) => {
                checks.record(name, false, err);
            }
        }
    }
    results
}

/// Runs `work` unless Ctrl-C or SIGTERM comes first; the servers are
/// stopped by their owners' drops either way.
async fn until_signal<T>(work: impl std::future::Future<Output = T>) -> Result<T, String> {
    tokio::select! {
        result = work => Ok(result),
        signal = shutdown_signal() => Err(format!("interrupted by {signal}; servers stopped")),
    }
}

/// Resolves on Ctrl-C or SIGTERM, naming it.
async fn shutdown_signal() -> &'static str {
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return "Ctrl-C";
            }
        };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "Ctrl-C",
        _ = terminate.recv() => "SIGTERM",
    }
}
