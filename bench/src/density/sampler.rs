//! Every process of the control plane, sampled every two seconds while
//! the run goes: RSS and CPU seconds from `/proc`, and the controllers'
//! and the scheduler's queue depths from the API servers' `/metrics`
//! (the embedded components report there).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::apiserver::http::Connection;

pub const PERIOD: Duration = Duration::from_secs(2);

/// One sampling moment.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Sample {
    /// Seconds since the run started.
    pub at: f64,
    pub phase: usize,
    /// Per process, by name: RSS in MB and CPU seconds so far (absent
    /// once the process is gone).
    pub rss_mb: BTreeMap<String, f64>,
    pub cpu_s: BTreeMap<String, f64>,
    /// `workqueue_depth` by queue name, `scheduler_pending_pods` by
    /// sub-queue (`scheduler active`, ...): the largest any server reported.
    pub queues: BTreeMap<String, f64>,
}

/// The processes to sample (added as they start) and what was sampled.
#[derive(Default)]
pub struct Samples {
    pub processes: Vec<(String, u32)>,
    pub metrics_ports: Vec<u16>,
    pub taken: Vec<Sample>,
}

pub type Shared = Arc<Mutex<Samples>>;

/// Samples until `stop`, every [`PERIOD`].
pub async fn run(
    samples: Shared,
    phase: Arc<AtomicUsize>,
    started: Instant,
    stop: Arc<AtomicBool>,
) {
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut connections: BTreeMap<u16, Connection> = BTreeMap::new();
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let (processes, ports) = {
            let samples = samples.lock().expect("samples");
            (samples.processes.clone(), samples.metrics_ports.clone())
        };
        let mut queues = BTreeMap::new();
        for port in ports {
            let connection = connections
                .entry(port)
                .or_insert_with(|| Connection::new(port, Duration::from_secs(5)));
            if let Ok(answer) = connection.get("/metrics").await {
                merge_queues(&String::from_utf8_lossy(&answer.body), &mut queues);
            }
        }
        let mut sample = Sample {
            at: started.elapsed().as_secs_f64(),
            phase: phase.load(Ordering::Relaxed),
            rss_mb: BTreeMap::new(),
            cpu_s: BTreeMap::new(),
            queues,
        };
        for (name, pid) in processes {
            if let (Some(rss), Some(cpu)) = (rss_mb(pid), crate::cpu::process_cpu_seconds(pid)) {
                sample.rss_mb.insert(name.clone(), rss);
                sample.cpu_s.insert(name, cpu);
            }
        }
        samples.lock().expect("samples").taken.push(sample);
    }
}

/// VmRSS of process `pid`, in MB.
pub fn rss_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Adds the queue depths in a Prometheus text `body` to `queues`,
/// keeping the larger value per queue.
fn merge_queues(body: &str, queues: &mut BTreeMap<String, f64>) {
    for line in body.lines() {
        let (key, label) = if let Some(rest) = line.strip_prefix("workqueue_depth{") {
            ("workqueue", rest)
        } else if let Some(rest) = line.strip_prefix("scheduler_pending_pods{") {
            ("scheduler", rest)
        } else {
            continue;
        };
        let Some((labels, value)) = label.split_once("} ") else {
            continue;
        };
        let Some(name) = labels.split('"').nth(1) else {
            continue;
        };
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        let entry = queues.entry(format!("{key} {name}")).or_insert(0.0);
        *entry = entry.max(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_queue_depths() {
        let body = "# HELP workqueue_depth x\nworkqueue_depth{name=\"replicaset\"} 12\n\
                    scheduler_pending_pods{queue=\"active\"} 3\nworkqueue_adds_total{name=\"x\"} 9\n";
        let mut queues = BTreeMap::new();
        merge_queues(body, &mut queues);
        merge_queues("workqueue_depth{name=\"replicaset\"} 4\n", &mut queues);
        assert_eq!(queues["workqueue replicaset"], 12.0);
        assert_eq!(queues["scheduler active"], 3.0);
        assert_eq!(queues.len(), 2);
    }

    #[test]
    fn reads_own_rss() {
        assert!(rss_mb(std::process::id()).unwrap() > 0.0);
    }
}
