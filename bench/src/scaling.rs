//! The runs by core count (`--cores`): how each server's ops/s, p99 and CPU
//! per operation change as it gets more cores, capstan next to etcd, as a
//! table and a picture. A server whose ops/s stop growing with cores while
//! a thread of it is at a full core has a serial ceiling.

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;

use crate::report::RunStats;
use crate::servers::ServerKind;

const WIDTH: u32 = 1100;
const HEIGHT: u32 = 520;

/// The rows of one (workload, clients) at one core count, if both ran.
fn find(stats: &[RunStats], like: &RunStats, server: ServerKind) -> Option<RunStats> {
    stats
        .iter()
        .find(|s| {
            s.server == server
                && s.workload == like.workload
                && s.clients == like.clients
                && s.cores == like.cores
        })
        .cloned()
}

/// For each (workload, clients) and core count: ops/s, p99, CPU per 1,000
/// operations of each server, and ops/s relative to the fewest cores.
pub fn table(stats: &[RunStats]) -> String {
    let mut keys: Vec<&RunStats> = stats
        .iter()
        .filter(|s| s.server == ServerKind::Capstan && s.cores.is_some())
        .collect();
    keys.sort_by_key(|s| (s.workload as u8, s.clients, s.cores));
    let mut out = String::from("by core count (both servers pinned to the same cores):\n");
    let _ = writeln!(
        out,
        "{:<8} {:>7} {:>5} {:>10} {:>10} {:>6} {:>8} {:>8} {:>9} {:>9} {:>7} {:>7}",
        "workload",
        "clients",
        "cores",
        "c ops/s",
        "e ops/s",
        "c/e",
        "c p99 ms",
        "e p99 ms",
        "c cpu/1k",
        "e cpu/1k",
        "c grow",
        "e grow"
    );
    for capstan in keys {
        out.push_str(&row(stats, capstan));
    }
    out
}

/// A (workload, clients, cores) row: capstan's run next to etcd's.
fn row(stats: &[RunStats], capstan: &RunStats) -> String {
    let etcd = find(stats, capstan, ServerKind::Etcd);
    let fewest_cores = |server| {
        (stats.iter())
            .filter(|s| {
                s.server == server
                    && s.workload == capstan.workload
                    && s.clients == capstan.clients
                    && s.cores.is_some()
            })
            .min_by_key(|s| s.cores)
            .map(|s| s.ops_per_sec)
    };
    let grow = |now: Option<f64>, base: Option<f64>| match (now, base) {
        (Some(now), Some(base)) if base > 0.0 => format!("{:.2}x", now / base),
        _ => "-".into(),
    };
    let dash = |value: Option<String>| value.unwrap_or_else(|| "-".into());
    let e = etcd.as_ref();
    format!(
        "{:<8} {:>7} {:>5} {:>10.1} {:>10} {:>6} {:>8.3} {:>8} {:>9} {:>9} {:>7} {:>7}\n",
        capstan.workload.to_string(),
        capstan.clients,
        capstan.cores.unwrap_or(0),
        capstan.ops_per_sec,
        dash(e.map(|e| format!("{:.1}", e.ops_per_sec))),
        dash(
            e.filter(|e| e.ops_per_sec > 0.0)
                .map(|e| format!("{:.2}x", capstan.ops_per_sec / e.ops_per_sec))
        ),
        capstan.p99_us as f64 / 1000.0,
        dash(e.map(|e| format!("{:.3}", e.p99_us as f64 / 1000.0))),
        dash(capstan.cpu_s_per_1k_ops.map(|c| format!("{c:.3}"))),
        dash(
            e.and_then(|e| e.cpu_s_per_1k_ops)
                .map(|c| format!("{c:.3}"))
        ),
        grow(Some(capstan.ops_per_sec), fewest_cores(ServerKind::Capstan)),
        grow(e.map(|e| e.ops_per_sec), fewest_cores(ServerKind::Etcd)),
    )
}

/// One line per (server, workload, clients): ops/s against core count.
pub fn write_svg(path: &Path, stats: &[RunStats], members: usize) -> Result<(), String> {
    let pinned: Vec<&RunStats> = stats.iter().filter(|s| s.cores.is_some()).collect();
    let most_cores = pinned.iter().filter_map(|s| s.cores).max().unwrap_or(1);
    let highest = pinned.iter().map(|s| s.ops_per_sec).fold(0.0_f64, f64::max);
    let drawing = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    let draw = |err: DrawingAreaErrorKind<_>| format!("draw {}: {err}", path.display());
    drawing.fill(&WHITE).map_err(draw)?;
    let title = format!("ops/s by core count, {members} member(s): capstan o, etcd x");
    let mut chart = ChartBuilder::on(&drawing)
        .caption(title, ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .build_cartesian_2d(0.5..most_cores as f64 + 0.5, 0.0..highest * 1.3 + 1e-9)
        .map_err(draw)?;
    chart
        .configure_mesh()
        .x_desc("cores")
        .y_desc("ops/s")
        .x_labels(most_cores.min(16))
        .draw()
        .map_err(draw)?;
    let mut series: Vec<(ServerKind, String)> = Vec::new();
    for s in &pinned {
        let key = (s.server, format!("{} x{}", s.workload, s.clients));
        if !series.contains(&key) {
            series.push(key);
        }
    }
    for (at, (server, label)) in series.iter().enumerate() {
        let colour = Palette99::pick(at / 2 + at % 2 * 7).to_rgba();
        let mut points: Vec<(f64, f64)> = (pinned.iter())
            .filter(|s| s.server == *server && format!("{} x{}", s.workload, s.clients) == *label)
            .map(|s| (s.cores.unwrap_or(0) as f64, s.ops_per_sec))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let style = ShapeStyle::from(&colour).stroke_width(2);
        chart
            .draw_series(std::iter::once(PathElement::new(points.clone(), style)))
            .map_err(draw)?
            .label(format!("{server} {label}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour));
        let marks = points.into_iter().map(|point| -> DynElement<_, _> {
            match server {
                ServerKind::Capstan => Circle::new(point, 4, style.filled()).into_dyn(),
                ServerKind::Etcd => Cross::new(point, 5, style).into_dyn(),
            }
        });
        chart.draw_series(marks).map_err(draw)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(draw)?;
    drawing.present().map_err(draw)
}
