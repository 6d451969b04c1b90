//! A CronJob's schedule: kube's five-field cron syntax (and `@hourly`,
//! `@daily`, ...) through the croner crate, evaluated in `timeZone` (an
//! IANA name through chrono-tz; the controller's UTC without one); which
//! start time is due now and how many were missed; when the next is.

use std::str::FromStr;

use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;
use k8s_openapi::chrono::{DateTime, Utc};

/// Past this many missed start times kube stops counting and warns.
pub const MAX_MISSED: usize = 100;

/// A parsed schedule in its time zone.
#[derive(Debug)]
pub struct Schedule {
    cron: Cron,
    zone: Tz,
}

/// Why a schedule cannot be used, with kube's event reasons.
#[derive(Debug, PartialEq)]
pub enum Unusable {
    /// `UnparseableSchedule`.
    Schedule(String),
    /// `UnknownTimeZone`.
    TimeZone(String),
}

impl Schedule {
    pub fn parse(schedule: &str, time_zone: Option<&str>) -> Result<Schedule, Unusable> {
        let zone = match time_zone {
            None => Tz::UTC,
            Some(name) => Tz::from_str(name).map_err(|_| {
                Unusable::TimeZone(format!(
                    "invalid timeZone: {name:?}: unknown time zone {name}"
                ))
            })?,
        };
        let parser = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build();
        let cron = parser
            .parse(schedule.trim())
            .map_err(|e| Unusable::Schedule(format!("unparseable schedule: {schedule:?} : {e}")))?;
        Ok(Schedule { cron, zone })
    }

    /// The first start time after `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(&self.zone);
        let next = self.cron.find_next_occurrence(&local, false).ok()?;
        Some(next.with_timezone(&Utc))
    }

    /// The most recent start time in (`since`, `now`], and how many start
    /// times fell in that window (counting stops past [`MAX_MISSED`]).
    pub fn due(&self, since: DateTime<Utc>, now: DateTime<Utc>) -> (Option<DateTime<Utc>>, usize) {
        let mut latest = None;
        let mut count = 0;
        let mut cursor = since;
        while let Some(next) = self.next_after(cursor).filter(|t| *t <= now) {
            latest = Some(next);
            count += 1;
            if count > MAX_MISSED {
                // Jump to the last one before now rather than walk them all.
                latest = self.last_at_or_before(now).or(latest);
                break;
            }
            cursor = next;
        }
        (latest, count)
    }

    fn last_at_or_before(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = now.with_timezone(&self.zone);
        let previous = self.cron.find_previous_occurrence(&local, true).ok()?;
        Some(previous.with_timezone(&Utc))
    }

    /// `t` in the schedule's zone (the scheduled-timestamp annotation).
    pub fn local_rfc3339(&self, t: DateTime<Utc>) -> String {
        t.with_timezone(&self.zone).to_rfc3339()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn five_fields_descriptors_and_errors() {
        let s = Schedule::parse("*/5 * * * *", None).unwrap();
        assert_eq!(
            s.next_after(at("2026-01-01T00:03:00Z")),
            Some(at("2026-01-01T00:05:00Z"))
        );
        let hourly = Schedule::parse("@hourly", None).unwrap();
        assert_eq!(
            hourly.next_after(at("2026-01-01T00:03:00Z")),
            Some(at("2026-01-01T01:00:00Z"))
        );
        assert!(matches!(
            Schedule::parse("61 * * * *", None),
            Err(Unusable::Schedule(_))
        ));
        assert!(matches!(
            Schedule::parse("0 0 * * * *", None),
            Err(Unusable::Schedule(_))
        ));
        assert!(matches!(
            Schedule::parse("0 3 * * *", Some("Mars/Base")),
            Err(Unusable::TimeZone(_))
        ));
    }

    #[test]
    fn time_zones_move_the_start() {
        let s = Schedule::parse("0 3 * * *", Some("Europe/Berlin")).unwrap();
        // 03:00 in Berlin is 02:00 UTC in winter.
        assert_eq!(
            s.next_after(at("2026-01-10T00:00:00Z")),
            Some(at("2026-01-10T02:00:00Z"))
        );
        assert_eq!(
            s.local_rfc3339(at("2026-01-10T02:00:00Z")),
            "2026-01-10T03:00:00+01:00"
        );
    }

    #[test]
    fn due_is_the_latest_missed_start() {
        let s = Schedule::parse("* * * * *", None).unwrap();
        let (latest, count) = s.due(at("2026-01-01T00:00:30Z"), at("2026-01-01T00:03:10Z"));
        assert_eq!((latest, count), (Some(at("2026-01-01T00:03:00Z")), 3));
        let (none, zero) = s.due(at("2026-01-01T00:03:00Z"), at("2026-01-01T00:03:10Z"));
        assert_eq!((none, zero), (None, 0));
        let (latest, count) = s.due(at("2026-01-01T00:00:00Z"), at("2026-01-02T00:00:30Z"));
        assert_eq!(latest, Some(at("2026-01-02T00:00:00Z")));
        assert!(count > MAX_MISSED);
    }
}
