//! The annotations that steer a simulated pod (documented in the crate's
//! README). A pod is the user's input, so a bad value never stops the
//! pod: the default is used and the problem comes back as a warning the
//! node records as an Event on the pod.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::quantity;

/// The prefix every annotation of this crate starts with.
pub const PREFIX: &str = "nodes.capstan.dev/";
/// How long the pod stays Pending (ContainerCreating) before anything runs.
pub const START_DELAY: &str = "nodes.capstan.dev/start-delay";
/// How long each init container runs before it completes.
pub const INIT_DURATION: &str = "nodes.capstan.dev/init-duration";
/// How long the main containers run before they exit.
pub const RUN_DURATION: &str = "nodes.capstan.dev/run-duration";
/// The exit code of the main containers when they exit (0-255).
pub const EXIT_CODE: &str = "nodes.capstan.dev/exit-code";
/// How long containers take to stop once asked to (capped by the grace period).
pub const STOP_DURATION: &str = "nodes.capstan.dev/stop-duration";
/// `"false"`: readiness probes never succeed, so probed containers stay unready.
pub const READY: &str = "nodes.capstan.dev/ready";
/// The pod's CPU usage reported by metrics.k8s.io (a quantity).
pub const CPU_USAGE: &str = "nodes.capstan.dev/cpu-usage";
/// The pod's memory usage reported by metrics.k8s.io (a quantity).
pub const MEMORY_USAGE: &str = "nodes.capstan.dev/memory-usage";

/// What the annotations ask of one pod; `None` where they are silent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub start_delay: Duration,
    pub init_duration: Duration,
    pub run_duration: Option<Duration>,
    pub exit_code: i32,
    pub stop_duration: Duration,
    pub probes_succeed: bool,
    /// Millicores for the whole pod.
    pub cpu_usage: Option<i64>,
    /// Bytes for the whole pod.
    pub memory_usage: Option<i64>,
}

/// A bad annotation value, and what was used instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning(pub String);

impl Plan {
    /// Reads `annotations`; every value that cannot be used is a warning.
    pub fn parse(annotations: Option<&BTreeMap<String, String>>) -> (Plan, Vec<Warning>) {
        let mut reader = Reader {
            annotations,
            warnings: Vec::new(),
        };
        let plan = Plan {
            start_delay: reader.read(START_DELAY, duration).unwrap_or_default(),
            init_duration: reader.read(INIT_DURATION, duration).unwrap_or_default(),
            run_duration: reader.read(RUN_DURATION, duration),
            exit_code: reader.read(EXIT_CODE, exit_code).unwrap_or_default(),
            stop_duration: reader.read(STOP_DURATION, duration).unwrap_or_default(),
            probes_succeed: reader.read(READY, boolean).unwrap_or(true),
            cpu_usage: reader.read(CPU_USAGE, |v| usage(v, quantity::parse_milli)),
            memory_usage: reader.read(MEMORY_USAGE, |v| usage(v, quantity::parse_units)),
        };
        (plan, reader.warnings)
    }
}

struct Reader<'a> {
    annotations: Option<&'a BTreeMap<String, String>>,
    warnings: Vec<Warning>,
}

impl Reader<'_> {
    /// The value of `key` parsed, or `None` (with a warning if it was there).
    fn read<T>(&mut self, key: &str, parse: impl Fn(&str) -> Result<T, String>) -> Option<T> {
        let value = self.annotations?.get(key)?;
        parse(value)
            .map_err(|expected| {
                self.warnings.push(Warning(format!(
                    "annotation {key}: {value:?} is not {expected}; it is ignored"
                )))
            })
            .ok()
    }
}

fn boolean(text: &str) -> Result<bool, String> {
    match text {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("\"true\" or \"false\"".into()),
    }
}

/// The longest delay an annotation may ask for: longer ones are almost
/// certainly mistakes (`1000000s`), and a year still covers every test.
const LONGEST: Duration = Duration::from_secs(365 * 24 * 3600);

fn duration(text: &str) -> Result<Duration, String> {
    let expected = || "a duration such as 1s, 500ms or 2m30s (at most a year)".to_string();
    let parsed = humantime::parse_duration(text.trim()).map_err(|_| expected())?;
    (parsed <= LONGEST).then_some(parsed).ok_or_else(expected)
}

fn exit_code(text: &str) -> Result<i32, String> {
    text.trim()
        .parse::<i32>()
        .ok()
        .filter(|code| (0..=255).contains(code))
        .ok_or_else(|| "an exit code from 0 to 255".to_string())
}

fn usage(
    text: &str,
    parse: fn(&str) -> Result<i64, quantity::InvalidQuantity>,
) -> Result<i64, String> {
    parse(text)
        .ok()
        .filter(|v| *v >= 0)
        .ok_or_else(|| "a non-negative quantity such as 250m or 64Mi".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn silence_means_the_defaults() {
        let (plan, warnings) = Plan::parse(None);
        assert!(warnings.is_empty());
        assert_eq!(plan.run_duration, None);
        assert_eq!(plan.exit_code, 0);
        assert!(plan.probes_succeed);
    }

    #[test]
    fn every_annotation_is_read() {
        let given = annotations(&[
            (START_DELAY, "2s"),
            (INIT_DURATION, "500ms"),
            (RUN_DURATION, "1m30s"),
            (EXIT_CODE, "3"),
            (STOP_DURATION, "5s"),
            (READY, "false"),
            (CPU_USAGE, "250m"),
            (MEMORY_USAGE, "64Mi"),
        ]);
        let (plan, warnings) = Plan::parse(Some(&given));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(
            plan,
            Plan {
                start_delay: Duration::from_secs(2),
                init_duration: Duration::from_millis(500),
                run_duration: Some(Duration::from_secs(90)),
                exit_code: 3,
                stop_duration: Duration::from_secs(5),
                probes_succeed: false,
                cpu_usage: Some(250),
                memory_usage: Some(64 << 20),
            }
        );
    }

    #[test]
    fn bad_values_are_warnings_and_the_defaults_stay() {
        let given = annotations(&[
            (EXIT_CODE, "300"),
            (RUN_DURATION, "soon"),
            (READY, "maybe"),
            (CPU_USAGE, "-1"),
            (START_DELAY, "100000000s"),
        ]);
        let (plan, warnings) = Plan::parse(Some(&given));
        assert_eq!(plan.exit_code, 0);
        assert_eq!(plan.run_duration, None);
        assert_eq!(plan.start_delay, Duration::ZERO);
        assert!(plan.probes_succeed);
        assert_eq!(warnings.len(), 5);
        assert!(warnings.contains(&Warning(
            "annotation nodes.capstan.dev/exit-code: \"300\" is not an exit code from 0 to 255; it is ignored".into()
        )));
    }
}
