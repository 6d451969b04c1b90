//! Seat demand: how many seats a level's requests occupy or wait for,
//! integrated over time so each adjustment of the limits sees the
//! period's average, deviation and peak, and a smoothed figure that
//! decays slowly (half-life about 5 minutes at one adjustment per 10 s).

use tokio::time::Instant;

/// Weight of the previous smoothed figure at each adjustment.
const SMOOTHING: f64 = 0.977;

/// The time integral of a value that changes in steps.
#[derive(Debug, Clone)]
pub struct Integrator {
    value: f64,
    since: Instant,
    started: Instant,
    sum: f64,
    sum_of_squares: f64,
    max: f64,
}

/// One period's statistics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Period {
    pub average: f64,
    pub deviation: f64,
    pub max: f64,
    pub seconds: f64,
}

impl Integrator {
    pub fn new(now: Instant) -> Integrator {
        Integrator {
            value: 0.0,
            since: now,
            started: now,
            sum: 0.0,
            sum_of_squares: 0.0,
            max: 0.0,
        }
    }

    /// The value is `value` from `now` on.
    pub fn set(&mut self, now: Instant, value: f64) {
        self.accumulate(now);
        self.value = value;
        self.max = self.max.max(value);
    }

    /// The period's statistics; a new period starts at `now`.
    pub fn reset(&mut self, now: Instant) -> Period {
        self.accumulate(now);
        let seconds = now.duration_since(self.started).as_secs_f64();
        let period = if seconds > 0.0 {
            let average = self.sum / seconds;
            let variance = (self.sum_of_squares / seconds - average * average).max(0.0);
            Period {
                average,
                deviation: variance.sqrt(),
                max: self.max,
                seconds,
            }
        } else {
            Period {
                average: self.value,
                deviation: 0.0,
                max: self.max,
                seconds,
            }
        };
        // The next period starts from the value held now.
        let value = self.value;
        *self = Integrator {
            value,
            max: value,
            ..Integrator::new(now)
        };
        period
    }

    fn accumulate(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.since).as_secs_f64();
        self.sum += self.value * dt;
        self.sum_of_squares += self.value * self.value * dt;
        self.since = now;
    }
}

/// What the limit adjustment reads about a level's demand.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DemandStats {
    pub average: f64,
    pub deviation: f64,
    pub high_watermark: f64,
    pub smoothed: f64,
}

impl DemandStats {
    pub fn update(&mut self, period: Period) {
        self.high_watermark = period.max;
        if period.seconds <= 0.0 {
            return;
        }
        self.average = period.average;
        self.deviation = period.deviation;
        let envelope = period.average + period.deviation;
        self.smoothed = envelope.max(SMOOTHING * self.smoothed + (1.0 - SMOOTHING) * envelope);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_step_function_averages_by_time() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut integrator = Integrator::new(start);
        integrator.set(at(0), 4.0);
        integrator.set(at(500), 0.0);
        let period = integrator.reset(at(1000));
        assert!((period.average - 2.0).abs() < 1e-9, "{period:?}");
        assert!((period.deviation - 2.0).abs() < 1e-9, "{period:?}");
        assert_eq!(period.max, 4.0);
        // The next period starts from the value held at the reset.
        integrator.set(at(1500), 2.0);
        let next = integrator.reset(at(2000));
        assert!((next.average - 1.0).abs() < 1e-9, "{next:?}");
        assert_eq!(next.max, 2.0);
    }

    #[test]
    fn smoothed_demand_rises_at_once_and_decays_slowly() {
        let mut stats = DemandStats::default();
        let busy = Period {
            average: 10.0,
            deviation: 2.0,
            max: 15.0,
            seconds: 10.0,
        };
        stats.update(busy);
        assert_eq!(stats.smoothed, 12.0);
        assert_eq!(stats.high_watermark, 15.0);
        stats.update(Period {
            average: 0.0,
            deviation: 0.0,
            max: 0.0,
            seconds: 10.0,
        });
        assert!(stats.smoothed > 11.0 && stats.smoothed < 12.0, "{stats:?}");
    }
}
