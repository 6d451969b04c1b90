//! The density run as a picture: Ready pods over time on top (the ramp,
//! the churn's dip and recovery, the deletion), the probe's latencies
//! below on a log scale, each kind in its colour, with the phases marked.

use std::path::Path;

use plotters::coord::combinators::IntoLogRange;
use plotters::prelude::*;

use super::phases::Measured;
use super::probe::{Kind, KINDS};
use super::{DensityConfig, PHASES};

const WIDTH: u32 = 1100;
const HEIGHT: u32 = 760;

fn colour(kind: Kind) -> RGBColor {
    match kind {
        Kind::Mutating => RGBColor(0x1f, 0x77, 0xb4),
        Kind::Get => RGBColor(0x2c, 0xa0, 0x2c),
        Kind::NamespaceList => RGBColor(0xff, 0x7f, 0x0e),
        Kind::ClusterList => RGBColor(0xd6, 0x27, 0x28),
    }
}

pub fn write_svg(path: &Path, measured: &Measured, config: &DensityConfig) -> Result<(), String> {
    let drawing = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    let draw = |err: DrawingAreaErrorKind<_>| format!("draw {}: {err}", path.display());
    drawing.fill(&WHITE).map_err(draw)?;
    let title = format!(
        "density: {} nodes, {} Deployments x {} replicas",
        config.nodes, config.deployments, config.replicas
    );
    let drawing = drawing.titled(&title, ("sans-serif", 20)).map_err(draw)?;
    let (top, bottom) = drawing.split_vertically(HEIGHT / 2 - 20);
    let series = measured
        .tracker
        .lock()
        .expect("tracker")
        .ready_series
        .clone();
    let points = measured.probe.lock().expect("probe").points.clone();
    let end = measured.spans.last().map_or(1.0, |s| s.1).max(1.0);
    ready_panel(&top, &series, &measured.spans, end).map_err(draw)?;
    latency_panel(&bottom, &points, end).map_err(draw)?;
    drawing.present().map_err(draw)
}

fn ready_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    series: &[(f64, usize)],
    spans: &[(f64, f64)],
    end: f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let most = series.iter().map(|p| p.1).max().unwrap_or(1).max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption("pods Ready (phases marked)", ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..end, 0.0..most * 1.1)?;
    chart.configure_mesh().x_desc("seconds").draw()?;
    for (index, span) in spans.iter().enumerate().skip(1) {
        if span.0 == span.1 {
            continue; // a skipped phase
        }
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(span.0, 0.0), (span.0, most * 1.1)],
            BLACK.mix(0.3),
        )))?;
        chart.draw_series(std::iter::once(Text::new(
            PHASES[index],
            (span.0 + end * 0.005, most * 1.05),
            ("sans-serif", 13),
        )))?;
    }
    let line: Vec<(f64, f64)> = series.iter().map(|(at, n)| (*at, *n as f64)).collect();
    chart.draw_series(std::iter::once(PathElement::new(
        line,
        RGBColor(0x1f, 0x77, 0xb4).stroke_width(2),
    )))?;
    Ok(())
}

fn latency_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    points: &[(f64, Kind, f64)],
    end: f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let highest = points.iter().map(|p| p.2).fold(10.0_f64, f64::max);
    let mut chart = ChartBuilder::on(area)
        .caption(
            "probe latency, ms (log scale; SLOs 1 s / 1 s / 5 s / 30 s)",
            ("sans-serif", 16),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..end, (0.5..highest * 2.0).log_scale())?;
    chart.configure_mesh().x_desc("seconds").draw()?;
    for kind in KINDS {
        let dots = points
            .iter()
            .filter(move |p| p.1 == kind)
            .map(move |p| Circle::new((p.0, p.2.max(0.5)), 2, colour(kind).filled()));
        chart
            .draw_series(dots)?
            .label(kind.name())
            .legend(move |(x, y)| Circle::new((x + 5, y), 4, colour(kind).filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
}
