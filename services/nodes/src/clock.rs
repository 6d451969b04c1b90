//! Time as the API stores it: whole seconds (`metav1.Time` drops the
//! fraction), so every time this crate derives from a stored one is
//! computed in whole seconds too and comes out the same after a reload.

use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};

/// `t` without its fraction of a second.
pub fn whole_seconds(t: DateTime<Utc>) -> DateTime<Utc> {
    t.duration_trunc(TimeDelta::seconds(1)).unwrap_or(t)
}

/// `t + d`, saturating far in the future rather than overflowing.
pub fn after(t: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(d)
        .ok()
        .and_then(|d| t.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// `t - d`, saturating at the epoch's far past.
pub fn before(t: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(d)
        .ok()
        .and_then(|d| t.checked_sub_signed(d))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_are_dropped_and_sums_saturate() {
        let t = DateTime::parse_from_rfc3339("2025-01-01T00:00:01.75Z")
            .unwrap()
            .to_utc();
        assert_eq!(whole_seconds(t).to_rfc3339(), "2025-01-01T00:00:01+00:00");
        assert_eq!(after(t, Duration::MAX), DateTime::<Utc>::MAX_UTC);
        assert_eq!(
            before(t, Duration::from_secs(1)),
            after(t, Duration::ZERO) - TimeDelta::seconds(1)
        );
    }
}
