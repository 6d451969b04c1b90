//! Simulated container logs. Nothing is stored: a run's log is a function
//! of its start (and end) time — a line when it starts, one every 10 s
//! while it runs, one when it exits — so `--tail`, `--since-time`,
//! `--timestamps`, `--limit-bytes` and `--previous` are arithmetic, and
//! memory stays flat however long a container runs.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};

use crate::clock::after;

/// One line every this long while the container runs.
pub const EVERY: Duration = Duration::from_secs(10);

/// One run of a container.
#[derive(Debug, Clone)]
pub struct RunLog {
    pub container: String,
    pub image: String,
    pub node: String,
    pub started: DateTime<Utc>,
    /// When it exited, and its exit code.
    pub finished: Option<(DateTime<Utc>, i32)>,
}

/// What the caller asked for.
#[derive(Debug, Clone, Default)]
pub struct LogOptions {
    pub tail_lines: Option<u64>,
    pub since: Option<DateTime<Utc>>,
    pub timestamps: bool,
    pub limit_bytes: Option<u64>,
}

impl RunLog {
    /// How many periodic lines (the start line included) exist by `now`.
    fn periodic(&self, now: DateTime<Utc>) -> u64 {
        let every = EVERY.as_secs() as i64;
        match self.finished {
            Some((end, _)) => {
                let span = (end - self.started).num_seconds().max(0);
                ((span + every - 1) / every).max(1) as u64
            }
            None => ((now - self.started).num_seconds().max(0) / every + 1) as u64,
        }
    }

    /// How many lines exist by `now`.
    pub fn count(&self, now: DateTime<Utc>) -> u64 {
        if now < self.started {
            return 0;
        }
        self.periodic(now) + u64::from(self.finished.is_some())
    }

    /// Line `index`'s time and text (`now` tells periodic lines from the last).
    pub fn line(&self, index: u64, now: DateTime<Utc>) -> (DateTime<Utc>, String) {
        let periodic = self.periodic(now);
        match self.finished {
            Some((end, code)) if index >= periodic => (
                end,
                format!(
                    "capstan-nodes: container {} exited with code {code}",
                    self.container
                ),
            ),
            _ if index == 0 => (
                self.started,
                format!(
                    "capstan-nodes: container {} ({}) started on node {}",
                    self.container, self.image, self.node
                ),
            ),
            _ => (
                after(self.started, EVERY * index as u32),
                format!(
                    "capstan-nodes: container {} has been running for {}s",
                    self.container,
                    EVERY.as_secs() * index
                ),
            ),
        }
    }

    /// When line `index` appears (for a follower waiting for it).
    pub fn due(&self, index: u64, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if index < self.count(now) {
            return Some(self.line(index, now).0);
        }
        match self.finished {
            Some(_) => None,
            None => Some(after(self.started, EVERY * index as u32)),
        }
    }

    /// The first line to send at `now`, after `--tail` and `--since-time`.
    pub fn first(&self, options: &LogOptions, now: DateTime<Utc>) -> u64 {
        let count = self.count(now);
        let from_tail = options.tail_lines.map_or(0, |n| count.saturating_sub(n));
        let from_since = options
            .since
            .map_or(0, |since| self.first_since(since, now));
        from_tail.max(from_since)
    }
}

impl RunLog {
    /// The first line at or after `since`, by arithmetic (a year-old
    /// container has three million lines).
    fn first_since(&self, since: DateTime<Utc>, now: DateTime<Utc>) -> u64 {
        if since <= self.started {
            return 0;
        }
        let every = EVERY.as_millis() as i64;
        let index = ((since - self.started).num_milliseconds() + every - 1) / every;
        let periodic = self.periodic(now);
        match self.finished {
            _ if (index as u64) < periodic => index as u64,
            Some((end, _)) if end >= since => periodic,
            _ => self.count(now),
        }
    }
}

/// A line as sent, with its timestamp if asked.
pub fn render(at: DateTime<Utc>, text: &str, timestamps: bool) -> String {
    if timestamps {
        format!(
            "{} {text}\n",
            at.to_rfc3339_opts(SecondsFormat::Nanos, true)
        )
    } else {
        format!("{text}\n")
    }
}

/// `since_seconds` before `now`.
pub fn since_seconds(now: DateTime<Utc>, seconds: i64) -> DateTime<Utc> {
    now - TimeDelta::seconds(seconds.max(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2025-03-01T10:00:00Z")
            .unwrap()
            .to_utc()
            + TimeDelta::seconds(seconds)
    }

    fn run(finished: Option<(i64, i32)>) -> RunLog {
        RunLog {
            container: "app".into(),
            image: "docker.io/library/nginx:latest".into(),
            node: "n1".into(),
            started: at(0),
            finished: finished.map(|(s, c)| (at(s), c)),
        }
    }

    #[test]
    fn a_running_container_logs_every_ten_seconds() {
        let log = run(None);
        assert_eq!(log.count(at(0)), 1);
        assert_eq!(log.count(at(35)), 4);
        assert_eq!(
            log.line(3, at(35)),
            (
                at(30),
                "capstan-nodes: container app has been running for 30s".into()
            )
        );
        assert_eq!(log.due(4, at(35)), Some(at(40)));
        assert!(log.line(0, at(35)).1.contains("started on node n1"));
    }

    #[test]
    fn a_finished_run_ends_with_its_exit_code() {
        let log = run(Some((25, 3)));
        assert_eq!(log.count(at(100)), 4);
        assert_eq!(
            log.line(3, at(100)),
            (
                at(25),
                "capstan-nodes: container app exited with code 3".into()
            )
        );
        assert_eq!(log.due(4, at(100)), None);
        let quick = run(Some((0, 0)));
        assert_eq!(quick.count(at(5)), 2);
    }

    #[test]
    fn tail_and_since_pick_the_first_line() {
        let log = run(None);
        let tail = LogOptions {
            tail_lines: Some(2),
            ..LogOptions::default()
        };
        assert_eq!(log.first(&tail, at(35)), 2);
        let since = LogOptions {
            since: Some(at(15)),
            ..LogOptions::default()
        };
        assert_eq!(log.first(&since, at(35)), 2);
        let both = LogOptions {
            tail_lines: Some(10),
            since: Some(at(31)),
            ..LogOptions::default()
        };
        assert_eq!(log.first(&both, at(35)), 4);
        assert_eq!(
            render(at(0), "x", true),
            "2025-03-01T10:00:00.000000000Z x\n"
        );
    }
}
