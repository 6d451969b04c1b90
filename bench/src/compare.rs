//! This run's store results next to an earlier run's JSON report
//! (`--compare`), so a change to the store shows as a ratio per workload.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use crate::report::RunStats;

/// The table of this run against the report at `path`: ops/s and p99 of
/// each (server, workload, clients) found in both.
pub fn table(stats: &[RunStats], path: &Path) -> Result<String, String> {
    let text =
        std::fs::read_to_string(path).map_err(|err| format!("read {}: {err}", path.display()))?;
    let earlier: Value =
        serde_json::from_str(&text).map_err(|err| format!("parse {}: {err}", path.display()))?;
    let results = earlier["results"].as_array().cloned().unwrap_or_default();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "compared with {}:\n{:<8} {:>7} {:<8} {:>10} {:>10} {:>7} {:>8} {:>8} {:>7}",
        path.display(),
        "workload",
        "clients",
        "server",
        "ops/s",
        "before",
        "ratio",
        "p99 ms",
        "before",
        "ratio"
    );
    for run in stats {
        let Some(before) = results.iter().find(|r| same_run(r, run)) else {
            continue;
        };
        let ops_before = before["ops_per_sec"].as_f64().unwrap_or(0.0);
        let p99_before = before["p99_us"].as_f64().unwrap_or(0.0) / 1000.0;
        let p99 = run.p99_us as f64 / 1000.0;
        let _ = writeln!(
            out,
            "{:<8} {:>7} {:<8} {:>10.1} {:>10.1} {:>6.2}x {:>8.3} {:>8.3} {:>6.2}x",
            run.workload.to_string(),
            run.clients,
            run.server.to_string(),
            run.ops_per_sec,
            ops_before,
            ratio(run.ops_per_sec, ops_before),
            p99,
            p99_before,
            ratio(p99, p99_before)
        );
    }
    Ok(out)
}

fn same_run(earlier: &Value, run: &RunStats) -> bool {
    // Compared as the JSON writes them.
    earlier["server"] == as_json(run.server)
        && earlier["workload"] == as_json(run.workload)
        && earlier["clients"].as_u64() == Some(run.clients as u64)
}

fn as_json(value: impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn ratio(now: f64, before: f64) -> f64 {
    if before > 0.0 {
        now / before
    } else {
        f64::NAN
    }
}
