//! The API server results: capstan-store backend relative to the etcd
//! backend for each request kind, printed and for the JSON report.

use std::fmt::Write as _;

use serde::Serialize;

use super::{ApiOp, ApiStats};
use crate::servers::ServerKind;

/// The capstan-store backend relative to the etcd backend for one request
/// kind, both behind the same capstan-apiserver binary, from one run.
#[derive(Debug, Clone, Serialize)]
pub struct ApiRatio {
    pub request: ApiOp,
    pub clients: usize,
    /// Requests/s on capstan-store ÷ on etcd: above 1 is faster.
    pub throughput: f64,
    /// p50 on capstan-store ÷ on etcd: above 1 is slower.
    pub p50: f64,
    /// p99 on capstan-store ÷ on etcd: above 1 is slower.
    pub p99: f64,
}

pub fn ratios(stats: &[ApiStats]) -> Vec<ApiRatio> {
    let capstan = stats.iter().filter(|s| s.backend == ServerKind::Capstan);
    capstan
        .filter_map(|c| {
            let etcd = stats.iter().find(|e| {
                e.backend == ServerKind::Etcd && e.request == c.request && e.clients == c.clients
            })?;
            Some(ApiRatio {
                request: c.request,
                clients: c.clients,
                throughput: divide(c.ops_per_sec, etcd.ops_per_sec),
                p50: divide(c.p50_us as f64, etcd.p50_us as f64),
                p99: divide(c.p99_us as f64, etcd.p99_us as f64),
            })
        })
        .collect()
}

fn divide(a: f64, b: f64) -> f64 {
    match b > 0.0 {
        true => a / b,
        false => f64::NAN,
    }
}

fn times(x: Option<f64>) -> String {
    match x {
        Some(x) if x.is_finite() => format!("{x:.2}x"),
        _ => "-".into(),
    }
}

fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

/// One row per (request kind, backend); the capstan-store rows carry the
/// ratios to the etcd rows.
pub fn table(stats: &[ApiStats]) -> String {
    let ratios = ratios(stats);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<7} {:>7} {:<8} {:>9} {:>10} {:>8} {:>8} {:>8} {:>6} {:>9} {:>7} {:>7}",
        "request",
        "clients",
        "backend",
        "requests",
        "req/s",
        "p50 ms",
        "p99 ms",
        "max ms",
        "errors",
        "req/s c/e",
        "p50 c/e",
        "p99 c/e"
    );
    for s in stats {
        let ratio = (s.backend == ServerKind::Capstan)
            .then(|| ratios.iter().find(|r| r.request == s.request))
            .flatten();
        let _ = writeln!(
            out,
            "{:<7} {:>7} {:<8} {:>9} {:>10.1} {:>8} {:>8} {:>8} {:>6} {:>9} {:>7} {:>7}",
            s.request.to_string(),
            s.clients,
            s.backend.name(),
            s.ok,
            s.ops_per_sec,
            ms(s.p50_us),
            ms(s.p99_us),
            ms(s.max_us),
            s.errors,
            times(ratio.map(|r| r.throughput)),
            times(ratio.map(|r| r.p50)),
            times(ratio.map(|r| r.p99)),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(backend: ServerKind, ops: f64, p99_us: u64) -> ApiStats {
        ApiStats {
            backend,
            request: ApiOp::Get,
            clients: 16,
            ok: 10,
            errors: 0,
            elapsed_s: 1.0,
            ops_per_sec: ops,
            mean_us: 1.0,
            p50_us: 100,
            p99_us,
            p999_us: p99_us,
            max_us: p99_us,
            list_size: None,
            error_samples: Vec::new(),
        }
    }

    #[test]
    fn ratios_are_capstan_over_etcd() {
        let stats = [
            row(ServerKind::Capstan, 300.0, 2000),
            row(ServerKind::Etcd, 200.0, 1000),
        ];
        let ratios = ratios(&stats);
        assert_eq!(ratios.len(), 1);
        assert!((ratios[0].throughput - 1.5).abs() < 1e-9);
        assert!((ratios[0].p99 - 2.0).abs() < 1e-9);
        assert!((ratios[0].p50 - 1.0).abs() < 1e-9);
        let printed = table(&stats);
        assert!(printed.contains("1.50x"), "{printed}");
    }

    #[test]
    fn no_ratio_without_an_etcd_row() {
        assert!(ratios(&[row(ServerKind::Capstan, 1.0, 1)]).is_empty());
    }
}
