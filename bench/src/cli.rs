//! Command-line flags and the settled run configuration.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::apiserver::ApiConfig;
use crate::run_spec::Workload;

/// The most connections one workload opens; clients beyond this share them,
/// as etcd's own `benchmark` tool shares `--conns` among `--clients`.
pub const DEFAULT_MAX_CONNS: usize = 16;

/// Largest client count accepted, so a typo cannot spawn a million tasks.
const MAX_CLIENTS: usize = 4096;

/// Largest core count accepted (`--cores`); the machine's own limit is
/// checked in `validate`.
const MAX_CORES: usize = 1024;

/// Largest `--api-list-size`: the list namespace is filled before timing.
const MAX_LIST_SIZE: usize = 100_000;

#[derive(Debug, Parser)]
#[command(
    name = "capstan-bench",
    about = "capstan-store next to a real etcd, on the etcd API and behind capstan-apiserver, in one run",
    long_about = "Starts a capstan-store and (unless --skip-etcd) a real etcd on free loopback \
                  ports in fresh temporary data directories. The store workload runs puts and \
                  linearizable single-key gets against each for every client count; the \
                  apiserver workload then starts a capstan-apiserver on each store and runs \
                  gets of one ConfigMap, consistent lists of a namespace of them and creates. \
                  Every answer is checked as it goes; ops/s and latency percentiles are \
                  reported with capstan/etcd ratios measured in the same run."
)]
pub struct Args {
    /// How long each workload runs (`10s`, `500ms`, `2m`; a bare number is seconds).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,

    /// Comma-separated numbers of concurrent clients; every workload runs once per count.
    #[arg(long, default_value = "1,64", value_parser = parse_clients)]
    pub clients: ClientCounts,

    /// Size in bytes of every value written.
    #[arg(long, default_value_t = 256)]
    pub value_size: usize,

    /// Most gRPC connections per workload; clients share them round-robin.
    #[arg(long, default_value_t = DEFAULT_MAX_CONNS)]
    pub max_conns: usize,

    /// Comma-separated core counts: every store workload runs once per
    /// count with both servers pinned to that many cores, the same ones
    /// (sched_setaffinity: the lowest of the cores this process may use).
    /// Unpinned when not given.
    #[arg(long, value_parser = parse_core_counts)]
    pub cores: Option<CoreCounts>,

    /// With more than one `--cores` count: draw ops/s by core count, capstan
    /// next to etcd, as an SVG picture in this file.
    #[arg(long)]
    pub scaling_plot: Option<PathBuf>,

    /// Longest a single request may take before it counts as an error.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub request_timeout: Duration,

    /// Longest a server may take to become healthy after it is started.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub startup_timeout: Duration,

    /// The capstan-store binary [default: `capstan-store` next to this executable].
    #[arg(long)]
    pub store_bin: Option<PathBuf>,

    /// The etcd binary to compare against (looked up on PATH when bare).
    #[arg(long, default_value = "etcd")]
    pub etcd_bin: PathBuf,

    /// Members per server: 1 runs single members, 3 or 5 run whole clusters
    /// of capstan-store and of etcd on loopback.
    #[arg(long, default_value_t = 1)]
    pub members: usize,

    /// Benchmark capstan-store alone (no ratios are reported).
    #[arg(long)]
    pub skip_etcd: bool,

    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,

    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,

    /// Watchers of the watch fan-out workload, all on one prefix a writer
    /// puts to at `--watch-rate` puts per second; 0 skips it.
    #[arg(long, default_value_t = 1000)]
    pub watchers: usize,

    /// Keys of the scale run, loaded into each server after the other
    /// workloads (disk, RSS, a page of a range, a count, a replay of the
    /// history by a watch, a kill -9 and restart); 0 skips it.
    #[arg(long, default_value_t = 0)]
    pub scale_keys: usize,

    /// Puts per second during the watch fan-out workload.
    #[arg(long, default_value_t = 50)]
    pub watch_rate: u32,

    /// Also draw the store results as an SVG picture in this file: ops/s
    /// and p99 per workload and client count, capstan next to etcd.
    #[arg(long)]
    pub plot: Option<PathBuf>,

    /// A JSON report of an earlier run (`--json`) to compare this one with:
    /// each store result's ops/s and p99 is printed next to that run's.
    #[arg(long)]
    pub compare: Option<PathBuf>,

    /// Which workloads: `store` (put/get on the etcd API), `apiserver`
    /// (get/list/create through capstan-apiserver on each store), or `all`
    /// (both); or, alone, `scheduler` (capstan-scheduler in kube's
    /// scheduler_perf shape), `heartbeats` (capstan-nodes holding
    /// Leases), each against a fresh `capstan`, or `density` (nodes,
    /// Deployments, churn and deletion on a fresh control plane; the JSON
    /// and picture go to `--json` and `--plot`).
    #[arg(long, default_value = "all", value_parser = ["store", "apiserver", "all", "scheduler", "heartbeats", "density"])]
    pub workload: String,

    /// `--workload scheduler`: Ready nodes created first.
    #[arg(long, default_value_t = 1000)]
    pub scheduler_nodes: usize,

    /// `--workload scheduler`: pods to schedule per case.
    #[arg(long, default_value_t = 10_000)]
    pub scheduler_pods: usize,

    /// `--workload scheduler`: the cases, each on a fresh cluster:
    /// `basic` (SchedulingBasic), `spread` (TopologySpreading), `affinity`
    /// (InterPodAffinity).
    #[arg(long, default_value = "basic,spread,affinity")]
    pub scheduler_cases: String,

    /// `--workload heartbeats`: simulated nodes holding their Leases.
    #[arg(long, default_value_t = 5000)]
    pub heartbeat_nodes: usize,

    /// `--workload heartbeats`: how long capstan's CPU is measured.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub heartbeat_window: Duration,

    /// `--workload density`: simulated nodes.
    #[arg(long, default_value_t = 1000)]
    pub density_nodes: usize,

    /// `--workload density`: Deployments created (30 per namespace).
    #[arg(long, default_value_t = 300)]
    pub density_deployments: usize,

    /// `--workload density`: replicas of each Deployment.
    #[arg(long, default_value_t = 100)]
    pub density_replicas: usize,

    /// `--workload density`: how long pods are deleted (and re-created
    /// by their ReplicaSets) at `--density-churn-rate` per second; 0 skips it.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub density_churn: Duration,

    /// `--workload density`: pods deleted per second during the churn.
    #[arg(long, default_value_t = 20)]
    pub density_churn_rate: usize,

    /// `--workload density`: `make cluster`'s shape (3 store members, 2
    /// API servers), the controllers' API server killed mid-ramp.
    #[arg(long)]
    pub density_cluster: bool,

    /// `--workload density`: requests/s (and burst) of the controller
    /// manager's, the scheduler's and the nodes' clients.
    #[arg(long, default_value_t = 1000)]
    pub density_client_qps: u32,

    /// `--workload density`: requests/s (and burst) of the controller
    /// manager's client alone, which paces pod creation (kube-controller-manager's
    /// `--kube-api-qps`, 20 by default, raised to 100 in kube's own scale
    /// tests). 300 creates pods about as fast as 2 cores make them Ready,
    /// so the ramp's startup latency measures the pipeline rather than a
    /// backlog; 0: `--density-client-qps`.
    #[arg(long, default_value_t = 300)]
    pub density_controller_qps: u32,

    /// `--workload density`: report the run against the targets of a
    /// 1,000-node, 30,000-pod run.
    #[arg(long)]
    pub density_targets: bool,

    /// `--workload density`: a noisy tenant lists every pod from this many
    /// loops during the churn (API Priority and Fairness under load); 0: none.
    #[arg(long, default_value_t = 0)]
    pub density_noisy_tenant: usize,

    /// Which etcd-API workloads run, comma-separated: `put`, `txn`, `get`
    /// (e.g. `put,txn` to measure writes only).
    #[arg(long, default_value = "put,txn,get", value_parser = parse_store_workloads)]
    pub store_workloads: StoreWorkloads,

    /// Concurrent clients of the API server workloads.
    #[arg(long, default_value_t = 16)]
    pub api_clients: usize,

    /// ConfigMaps in the namespace the API server list workload lists.
    #[arg(long, default_value_t = 1000)]
    pub api_list_size: usize,

    /// ConfigMaps created to measure the API server's watch cache (RSS per
    /// cached object, a list of all of them from the cache); 0 skips it.
    #[arg(long, default_value_t = 10_000)]
    pub api_cache_objects: usize,

    /// The capstan-apiserver binary (default: next to this executable).
    #[arg(long)]
    pub apiserver_bin: Option<PathBuf>,

    /// Run the API servers with `--authorization-mode=RBAC` and a token
    /// file; the clients send a plain user's token (see `apiserver::rbac`).
    #[arg(long)]
    pub api_rbac: bool,

    /// With `--api-rbac`: the API servers' `--authorization-mode`
    /// (`AlwaysAllow` measures the chain without the RBAC decision).
    #[arg(long, default_value = "RBAC")]
    pub api_authorization_mode: String,

    /// Audit every request at this level (`Metadata`, `Request`,
    /// `RequestResponse`) to a log file next to each API server.
    #[arg(long)]
    pub api_audit_level: Option<String>,

    /// Encrypt ConfigMaps at rest with this provider (`aescbc`, `aesgcm`,
    /// `secretbox`), as `--encryption-provider-config` does.
    #[arg(long)]
    pub api_encryption: Option<String>,
    /// Send every ConfigMap create through a no-op mutating admission
    /// webhook served by the bench over HTTPS.
    #[arg(long)]
    pub api_webhook: bool,
}

/// The parsed `--store-workloads` list, in the order given.
#[derive(Debug, Clone)]
pub struct StoreWorkloads(pub Vec<Workload>);

/// Parses `put,txn` into workloads (no duplicates).
pub fn parse_store_workloads(text: &str) -> Result<StoreWorkloads, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let workload = match part {
            "put" => Workload::Put,
            "txn" => Workload::Txn,
            "get" => Workload::Get,
            other => return Err(format!("unknown workload `{other}` (use put, txn, get)")),
        };
        if !out.contains(&workload) {
            out.push(workload);
        }
    }
    if out.is_empty() {
        return Err("give at least one workload, e.g. put,txn".into());
    }
    Ok(StoreWorkloads(out))
}

/// The parsed `--clients` list (a newtype so clap treats it as one value).
#[derive(Debug, Clone)]
pub struct ClientCounts(pub Vec<usize>);

/// The parsed `--cores` list.
#[derive(Debug, Clone)]
pub struct CoreCounts(pub Vec<usize>);

impl Args {
    /// Where the capstan-store binary is: the flag, or next to our own executable.
    pub fn store_bin(&self) -> Result<PathBuf, String> {
        if let Some(path) = &self.store_bin {
            return Ok(path.clone());
        }
        let exe = std::env::current_exe().map_err(|err| format!("locate own executable: {err}"))?;
        let dir = exe
            .parent()
            .ok_or_else(|| format!("{} has no parent directory", exe.display()))?;
        Ok(dir.join("capstan-store"))
    }

    /// Where capstan-apiserver is: the flag, or next to our own executable.
    pub fn apiserver_bin(&self) -> Result<PathBuf, String> {
        if let Some(path) = &self.apiserver_bin {
            return Ok(path.clone());
        }
        let store = self.store_bin()?;
        Ok(store.with_file_name("capstan-apiserver"))
    }

    /// What every API server run shares.
    pub fn api_config(&self) -> ApiConfig {
        ApiConfig {
            clients: self.api_clients,
            duration: self.duration,
            list_size: self.api_list_size,
            cache_objects: self.api_cache_objects,
            request_timeout: self.request_timeout,
            progress: !self.quiet,
        }
    }

    pub fn runs_store(&self) -> bool {
        matches!(self.workload.as_str(), "store" | "all")
    }

    pub fn runs_apiserver(&self) -> bool {
        matches!(self.workload.as_str(), "apiserver" | "all")
    }

    /// The `--workload scheduler` settings.
    pub fn scheduling_config(&self) -> Result<crate::scheduling::SchedulingConfig, String> {
        let cases = self
            .scheduler_cases
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(crate::scheduling::Case::parse)
            .collect::<Result<Vec<_>, _>>()?;
        if cases.is_empty() || self.scheduler_nodes == 0 || self.scheduler_pods == 0 {
            return Err(
                "--scheduler-cases, --scheduler-nodes and --scheduler-pods must not be empty or 0"
                    .into(),
            );
        }
        Ok(crate::scheduling::SchedulingConfig {
            nodes: self.scheduler_nodes,
            pods: self.scheduler_pods,
            cases,
            clients: self.api_clients,
            startup_timeout: self.startup_timeout,
            request_timeout: self.request_timeout,
            progress: !self.quiet,
        })
    }

    /// The `--workload density` settings.
    pub fn density_config(&self) -> Result<crate::density::DensityConfig, String> {
        if self.density_nodes == 0 || self.density_deployments == 0 || self.density_replicas == 0 {
            return Err(
                "--density-nodes, --density-deployments and --density-replicas must not be 0"
                    .into(),
            );
        }
        if self.density_client_qps == 0 {
            return Err("--density-client-qps must be positive".into());
        }
        Ok(crate::density::DensityConfig {
            nodes: self.density_nodes,
            deployments: self.density_deployments,
            replicas: self.density_replicas,
            churn: self.density_churn,
            churn_rate: self.density_churn_rate.max(1),
            cluster: self.density_cluster,
            client_qps: self.density_client_qps,
            controller_qps: match self.density_controller_qps {
                0 => self.density_client_qps,
                qps => qps,
            },
            clients: self.api_clients.min(16),
            targets: self.density_targets,
            noisy_tenant_loops: self.density_noisy_tenant,
            startup_timeout: self.startup_timeout,
            request_timeout: self.request_timeout,
            json: self.json.clone(),
            plot: self.plot.clone(),
            progress: !self.quiet,
        })
    }

    /// The `--workload heartbeats` settings.
    pub fn heartbeat_config(&self) -> crate::scheduling::HeartbeatConfig {
        crate::scheduling::HeartbeatConfig {
            nodes: self.heartbeat_nodes,
            window: self.heartbeat_window,
            startup_timeout: self.startup_timeout,
            request_timeout: self.request_timeout,
            progress: !self.quiet,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.api_clients == 0 || self.api_clients > MAX_CLIENTS {
            return Err(format!("--api-clients must be between 1 and {MAX_CLIENTS}"));
        }
        if self.api_list_size == 0 || self.api_list_size > MAX_LIST_SIZE {
            return Err(format!(
                "--api-list-size must be between 1 and {MAX_LIST_SIZE}"
            ));
        }
        if self.workload == "heartbeats" && self.heartbeat_window < Duration::from_secs(10) {
            return Err(
                "--heartbeat-window must be at least 10s (one Lease renewal interval)".into(),
            );
        }
        if self.duration.is_zero() {
            return Err("--duration must be positive".into());
        }
        if self.request_timeout.is_zero() {
            return Err("--request-timeout must be positive".into());
        }
        if self.max_conns == 0 || self.max_conns > MAX_CLIENTS {
            return Err(format!("--max-conns must be between 1 and {MAX_CLIENTS}"));
        }
        if let Some(cores) = &self.cores {
            let allowed = crate::cpu::allowed_cores()?.len();
            if let Some(too_many) = cores.0.iter().find(|&&n| n > allowed) {
                return Err(format!(
                    "--cores {too_many}: this process may only use {allowed} cores"
                ));
            }
        }
        if self.value_size > 1024 * 1024 {
            return Err(
                "--value-size must be at most 1 MiB (etcd's request limit is 1.5 MiB)".into(),
            );
        }
        Ok(())
    }
}

/// Parses `500ms`, `10s`, `2m`, `1h`, or a bare number of seconds (`1.5` too).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (try 10s, 500ms, 2m)"))?;
    let seconds = match unit {
        "" | "s" => number,
        "ms" => number / 1000.0,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        _ => {
            return Err(format!(
                "`{text}`: unknown unit `{unit}` (use ms, s, m or h)"
            ))
        }
    };
    if !seconds.is_finite() || !(0.0..=7.0 * 24.0 * 3600.0).contains(&seconds) {
        return Err(format!("`{text}` is out of range"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Parses `1,2,4` into core counts (each at least 1, no duplicates).
pub fn parse_core_counts(text: &str) -> Result<CoreCounts, String> {
    parse_counts(text, "core", MAX_CORES).map(CoreCounts)
}

/// Parses `1,64` into client counts (each at least 1, no duplicates).
pub fn parse_clients(text: &str) -> Result<ClientCounts, String> {
    parse_counts(text, "client", MAX_CLIENTS).map(ClientCounts)
}

fn parse_counts(text: &str, what: &str, most: usize) -> Result<Vec<usize>, String> {
    let mut counts = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let count: usize = part
            .parse()
            .map_err(|_| format!("`{part}` is not a {what} count"))?;
        if count == 0 || count > most {
            return Err(format!(
                "{what} counts must be between 1 and {most}, got {count}"
            ));
        }
        if !counts.contains(&count) {
            counts.push(count);
        }
    }
    if counts.is_empty() {
        return Err(format!("give at least one {what} count, e.g. 1,2"));
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("10x").is_err());
    }

    #[test]
    fn client_lists() {
        assert_eq!(parse_clients("1,64").unwrap().0, vec![1, 64]);
        assert_eq!(parse_clients(" 8 , 8,1").unwrap().0, vec![8, 1]);
        assert!(parse_clients("0").is_err());
        assert!(parse_clients("").is_err());
        assert!(parse_clients("a").is_err());
        assert_eq!(parse_core_counts("1,2,2").unwrap().0, vec![1, 2]);
        assert!(parse_core_counts("0").is_err());
    }

    #[test]
    fn workload_lists() {
        assert_eq!(
            parse_store_workloads("put, txn,put").unwrap().0,
            vec![Workload::Put, Workload::Txn]
        );
        assert!(parse_store_workloads("scan").is_err());
        assert!(parse_store_workloads("").is_err());
    }
}
