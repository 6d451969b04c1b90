//! scheduler_perf-shaped benchmark of the scheduler against the in-memory API.
//!
//! cargo run --release -p capstan-scheduler --example scheduler-perf -- \
//!     [basic|spread|affinity|default-spread|many-workloads|all] [nodes] [init pods] [measured pods]

use std::time::Duration;

use capstan_scheduler::perf::{run, PerfSpec, Workload};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let workloads = match args.first().map(String::as_str).unwrap_or("all") {
        "all" => vec![
            Workload::Basic,
            Workload::TopologySpread,
            Workload::InterPodAffinity,
            Workload::DefaultSpread,
            Workload::ManyWorkloads,
        ],
        name => match Workload::parse(name) {
            Some(workload) => vec![workload],
            None => {
                eprintln!(
                    "unknown workload {name:?}: basic, spread, affinity, default-spread, many-workloads or all"
                );
                std::process::exit(2);
            }
        },
    };
    let number =
        |i: usize, default: usize| args.get(i).and_then(|v| v.parse().ok()).unwrap_or(default);
    for workload in workloads {
        let spec = PerfSpec {
            workload,
            nodes: number(1, 1000),
            init_pods: number(2, 1000),
            measure_pods: number(3, 10_000),
        };
        match run(spec, Duration::from_secs(600)) {
            Ok(result) => println!("{result}"),
            Err(error) => {
                eprintln!("{}: {error}", workload.name());
                std::process::exit(1);
            }
        }
    }
}
