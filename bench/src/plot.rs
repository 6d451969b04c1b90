//! The store results as a picture: for each workload and client count,
//! capstan's bar next to etcd's, ops/s on top and p99 below, so a run can
//! be read at a glance and two runs' pictures compared side by side.

use std::path::Path;

use plotters::prelude::*;

use crate::report::RunStats;
use crate::servers::ServerKind;

const WIDTH: u32 = 1100;
const HEIGHT: u32 = 720;
const CAPSTAN: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const ETCD: RGBColor = RGBColor(0xff, 0x7f, 0x0e);

/// One bar group: a workload at a client count.
struct Group {
    label: String,
    capstan: Option<f64>,
    etcd: Option<f64>,
}

pub fn write_svg(path: &Path, stats: &[RunStats], title: &str) -> Result<(), String> {
    let drawing = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    let draw = |err: DrawingAreaErrorKind<_>| format!("draw {}: {err}", path.display());
    drawing.fill(&WHITE).map_err(draw)?;
    let drawing = drawing.titled(title, ("sans-serif", 20)).map_err(draw)?;
    let (top, bottom) = drawing.split_vertically(HEIGHT / 2 - 20);
    let throughput = groups(stats, |s| s.ops_per_sec);
    let p99 = groups(stats, |s| s.p99_us as f64 / 1000.0);
    panel(
        &top,
        "operations per second (higher is better)",
        &throughput,
    )
    .map_err(draw)?;
    panel(&bottom, "p99 latency, ms (lower is better)", &p99).map_err(draw)?;
    drawing.present().map_err(draw)
}

/// The groups in the order the runs were made, each with both servers.
fn groups(stats: &[RunStats], value: impl Fn(&RunStats) -> f64) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for run in stats {
        let label = format!("{} x{}", run.workload, run.clients);
        let at = match groups.iter().position(|g| g.label == label) {
            Some(at) => at,
            None => {
                groups.push(Group {
                    label,
                    capstan: None,
                    etcd: None,
                });
                groups.len() - 1
            }
        };
        match run.server {
            ServerKind::Capstan => groups[at].capstan = Some(value(run)),
            ServerKind::Etcd => groups[at].etcd = Some(value(run)),
        }
    }
    groups
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    groups: &[Group],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let highest = groups
        .iter()
        .flat_map(|g| [g.capstan, g.etcd])
        .flatten()
        .fold(0.0_f64, f64::max);
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..groups.len().max(1) as f64, 0.0..highest * 1.35 + 1e-9)?;
    let labels: Vec<&str> = groups.iter().map(|g| g.label.as_str()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let at = x.floor() as usize;
            let centred = (x - x.floor() - 0.5).abs() < 0.01;
            match labels.get(at) {
                Some(label) if centred => label.to_string(),
                _ => String::new(),
            }
        })
        .draw()?;
    for (series, colour, offset) in [("capstan", CAPSTAN, 0.1), ("etcd", ETCD, 0.5)] {
        let bars = groups.iter().enumerate().filter_map(move |(at, g)| {
            let value = if series == "capstan" {
                g.capstan
            } else {
                g.etcd
            }?;
            let left = at as f64 + offset;
            Some(Rectangle::new(
                [(left, 0.0), (left + 0.4, value)],
                colour.filled(),
            ))
        });
        chart
            .draw_series(bars)?
            .label(series)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled()));
    }
    // The axis runs a third above the highest bar: room for the legend.
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
}
