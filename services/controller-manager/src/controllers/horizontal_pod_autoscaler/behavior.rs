//! From the metrics' proposal to the count that is applied, kube's
//! normalization: recommendations are remembered per autoscaler, and a
//! change is held back to what the stabilization windows allow (the
//! highest recent recommendation before scaling down, the lowest before
//! scaling up); then the rate is limited, by the behaviour's policies
//! over the scale events of their periods, or without a behaviour by
//! kube's fixed rule (at most double, at least 4); then min and max.

use std::time::{Duration, Instant};

use k8s_openapi::api::autoscaling::v2::{HPAScalingRules, HorizontalPodAutoscalerBehavior};

/// Which of several policies wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Select {
    Max,
    Min,
    Disabled,
}

/// One policy: at most `value` pods, or `value` percent, per `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub percent: bool,
    pub value: i32,
    pub period: Duration,
}

/// One direction's rules, with kube's defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    pub window: Duration,
    pub select: Select,
    pub policies: Vec<Policy>,
}

impl Rules {
    /// `rules` over kube's defaults; `window` when it names none.
    fn from_spec(rules: Option<&HPAScalingRules>, default: Rules) -> Rules {
        let Some(rules) = rules else { return default };
        let policies: Vec<Policy> = rules
            .policies
            .iter()
            .flatten()
            .map(|p| Policy {
                percent: p.type_ == "Percent",
                value: p.value,
                period: Duration::from_secs(p.period_seconds.max(0) as u64),
            })
            .collect();
        Rules {
            window: rules
                .stabilization_window_seconds
                .map_or(default.window, |s| Duration::from_secs(s.max(0) as u64)),
            select: match rules.select_policy.as_deref() {
                Some("Min") => Select::Min,
                Some("Disabled") => Select::Disabled,
                Some(_) => Select::Max,
                None => default.select,
            },
            policies: if policies.is_empty() {
                default.policies
            } else {
                policies
            },
        }
    }

    fn longest_period(&self) -> Duration {
        self.policies
            .iter()
            .map(|p| p.period)
            .max()
            .unwrap_or_default()
    }
}

const fn policy(percent: bool, value: i32) -> Policy {
    Policy {
        percent,
        value,
        period: Duration::from_secs(15),
    }
}

/// Both directions' rules of `behavior`; the scale-down window defaults
/// to `--horizontal-pod-autoscaler-downscale-stabilization`.
pub fn rules(
    behavior: &HorizontalPodAutoscalerBehavior,
    downscale_window: Duration,
) -> (Rules, Rules) {
    let up = Rules {
        window: Duration::ZERO,
        select: Select::Max,
        policies: vec![policy(false, 4), policy(true, 100)],
    };
    let down = Rules {
        window: downscale_window,
        select: Select::Max,
        policies: vec![policy(true, 100)],
    };
    (
        Rules::from_spec(behavior.scale_up.as_ref(), up),
        Rules::from_spec(behavior.scale_down.as_ref(), down),
    )
}

/// The bounds and counts one normalization works on.
#[derive(Debug, Clone, Copy)]
pub struct Counts {
    pub min: i32,
    pub max: i32,
    pub current: i32,
    pub desired: i32,
}

/// The count to apply and why (the AbleToScale and ScalingLimited conditions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized {
    pub replicas: i32,
    pub able_reason: &'static str,
    pub able_message: &'static str,
    pub limited: bool,
    pub limit_reason: &'static str,
    pub limit_message: &'static str,
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    replicas: i32,
}

/// What one autoscaler recommended, and the scale changes it made.
#[derive(Debug, Default)]
pub struct History {
    recommendations: Vec<Sample>,
    scale_ups: Vec<Sample>,
    scale_downs: Vec<Sample>,
}

const READY: (&str, &str) = ("ReadyForNewScale", "recommended size matches current size");
const DOWN_STABILIZED: (&str, &str) = (
    "ScaleDownStabilized",
    "recent recommendations were higher than current one, applying the highest recent recommendation",
);
const UP_STABILIZED: (&str, &str) = (
    "ScaleUpStabilized",
    "recent recommendations were lower than current one, applying the lowest recent recommendation",
);
const WITHIN: (&str, &str) = (
    "DesiredWithinRange",
    "the desired count is within the acceptable range",
);
const TOO_MANY: (&str, &str) = (
    "TooManyReplicas",
    "the desired replica count is more than the maximum replica count",
);
const TOO_FEW: (&str, &str) = (
    "TooFewReplicas",
    "the desired replica count is less than the minimum replica count",
);
const UP_LIMIT: (&str, &str) = (
    "ScaleUpLimit",
    "the desired replica count is increasing faster than the maximum scale rate",
);
const DOWN_LIMIT: (&str, &str) = (
    "ScaleDownLimit",
    "the desired replica count is decreasing faster than the maximum scale rate",
);

fn normalized(
    stabilized: i32,
    able: (&'static str, &'static str),
    limit: (i32, (&'static str, &'static str)),
) -> Normalized {
    Normalized {
        replicas: limit.0,
        able_reason: able.0,
        able_message: able.1,
        limited: limit.0 != stabilized,
        limit_reason: limit.1 .0,
        limit_message: limit.1 .1,
    }
}

/// Replaces a sample older than `cutoff`, or adds one.
fn record(samples: &mut Vec<Sample>, sample: Sample, stale: impl Fn(&Sample) -> bool) {
    match samples.iter_mut().find(|s| stale(s)) {
        Some(slot) => *slot = sample,
        None => samples.push(sample),
    }
}

fn within(at: Instant, window: Duration, now: Instant) -> bool {
    now.checked_sub(window).is_none_or(|cutoff| at > cutoff)
}

impl History {
    /// Without a behaviour: the highest recommendation of the downscale
    /// window, then at most double (at least 4) and the bounds.
    pub fn normalize_plain(
        &mut self,
        counts: Counts,
        window: Duration,
        now: Instant,
    ) -> Normalized {
        let stabilized = self
            .recommendations
            .iter()
            .filter(|s| within(s.at, window, now))
            .map(|s| s.replicas)
            .fold(counts.desired, i32::max);
        let sample = Sample {
            at: now,
            replicas: counts.desired,
        };
        record(&mut self.recommendations, sample, |s| {
            !within(s.at, window, now)
        });
        let able = if stabilized != counts.desired {
            DOWN_STABILIZED
        } else {
            READY
        };
        let scale_up_limit = (counts.current.saturating_mul(2)).max(4);
        let (max, over) = if counts.max > scale_up_limit {
            (scale_up_limit, UP_LIMIT)
        } else {
            (counts.max, TOO_MANY)
        };
        let limit = if stabilized < counts.min {
            (counts.min, TOO_FEW)
        } else if stabilized > max {
            (max, over)
        } else {
            (stabilized, WITHIN)
        };
        normalized(stabilized, able, limit)
    }

    /// With a behaviour: both windows, then the policies' rates, then the bounds.
    pub fn normalize(
        &mut self,
        counts: Counts,
        (up, down): (&Rules, &Rules),
        now: Instant,
    ) -> Normalized {
        let (mut upper, mut lower) = (counts.desired, counts.desired);
        for sample in &self.recommendations {
            if within(sample.at, up.window, now) {
                upper = upper.min(sample.replicas);
            }
            if within(sample.at, down.window, now) {
                lower = lower.max(sample.replicas);
            }
        }
        let stabilized = counts.current.max(upper).min(lower);
        let sample = Sample {
            at: now,
            replicas: counts.desired,
        };
        record(&mut self.recommendations, sample, |s| {
            !within(s.at, up.window, now) && !within(s.at, down.window, now)
        });
        let able = match stabilized == counts.desired {
            true => READY,
            false if counts.desired >= counts.current => UP_STABILIZED,
            false => DOWN_STABILIZED,
        };
        let limit = self.rate_limit(
            Counts {
                desired: stabilized,
                ..counts
            },
            up,
            down,
            now,
        );
        normalized(stabilized, able, limit)
    }

    fn rate_limit(
        &self,
        counts: Counts,
        up: &Rules,
        down: &Rules,
        now: Instant,
    ) -> (i32, (&'static str, &'static str)) {
        if counts.desired > counts.current {
            let limit = self
                .scale_up_limit(counts.current, up, now)
                .max(counts.current);
            let (max, why) = if counts.max > limit {
                (limit, UP_LIMIT)
            } else {
                (counts.max, TOO_MANY)
            };
            if counts.desired > max {
                return (max, why);
            }
        } else if counts.desired < counts.current {
            let limit = self
                .scale_down_limit(counts.current, down, now)
                .min(counts.current);
            let (min, why) = if counts.min < limit {
                (limit, DOWN_LIMIT)
            } else {
                (counts.min, TOO_FEW)
            };
            if counts.desired < min {
                return (min, why);
            }
        }
        (counts.desired, WITHIN)
    }

    /// The replicas there were when `period` began.
    fn period_start(&self, current: i32, period: Duration, now: Instant) -> i32 {
        let changed = |events: &[Sample]| -> i32 {
            events
                .iter()
                .filter(|e| within(e.at, period, now))
                .map(|e| e.replicas)
                .sum()
        };
        current - changed(&self.scale_ups) + changed(&self.scale_downs)
    }

    fn scale_up_limit(&self, current: i32, rules: &Rules, now: Instant) -> i32 {
        let proposals = rules.policies.iter().map(|p| {
            let start = self.period_start(current, p.period, now);
            match p.percent {
                true => (f64::from(start) * (1.0 + f64::from(p.value) / 100.0)).ceil() as i32,
                false => start.saturating_add(p.value),
            }
        });
        select(rules.select, proposals, current, true)
    }

    fn scale_down_limit(&self, current: i32, rules: &Rules, now: Instant) -> i32 {
        let proposals = rules.policies.iter().map(|p| {
            let start = self.period_start(current, p.period, now);
            match p.percent {
                true => (f64::from(start) * (1.0 - f64::from(p.value) / 100.0)) as i32,
                false => start - p.value,
            }
        });
        select(rules.select, proposals, current, false)
    }

    /// Remembers a change from `previous` to `new` for the policies' periods.
    pub fn record_scale(
        &mut self,
        previous: i32,
        new: i32,
        (up, down): (&Rules, &Rules),
        now: Instant,
    ) {
        let (events, change, longest) = match new.cmp(&previous) {
            std::cmp::Ordering::Greater => {
                (&mut self.scale_ups, new - previous, up.longest_period())
            }
            std::cmp::Ordering::Less => {
                (&mut self.scale_downs, previous - new, down.longest_period())
            }
            std::cmp::Ordering::Equal => return,
        };
        let sample = Sample {
            at: now,
            replicas: change,
        };
        record(events, sample, |e| !within(e.at, longest, now));
    }
}

/// The policy `select` picks among `proposals`: for scaling up Max is the
/// largest, for scaling down Max is the largest change (the smallest count).
fn select(select: Select, proposals: impl Iterator<Item = i32>, current: i32, up: bool) -> i32 {
    let largest = matches!(select, Select::Max) == up;
    let chosen = match select {
        Select::Disabled => return current,
        _ if largest => proposals.max(),
        _ => proposals.min(),
    };
    chosen.unwrap_or(current)
}
