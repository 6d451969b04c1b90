//! Timestamps as Kubernetes writes them (RFC 3339, second precision) and
//! ages as kubectl users read them (`5s`, `3m12s`, `4d`).

use std::time::{Duration, SystemTime};

pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// The time `seconds` from now, as [`now_rfc3339`] writes it.
pub fn rfc3339_in(seconds: i64) -> String {
    let later = SystemTime::now() + Duration::from_secs(seconds.max(0) as u64);
    humantime::format_rfc3339_seconds(later).to_string()
}

/// `seconds` since the Unix epoch, as [`now_rfc3339`] writes times.
pub fn at(seconds: i64) -> String {
    let then = SystemTime::UNIX_EPOCH + Duration::from_secs(seconds.max(0) as u64);
    humantime::format_rfc3339_seconds(then).to_string()
}

/// Whether `timestamp` is now or earlier (an unreadable one counts as past).
pub fn is_past(timestamp: &str) -> bool {
    humantime::parse_rfc3339(timestamp).map_or(true, |t| t <= SystemTime::now())
}

/// Age of a timestamp, or `<unknown>` when it does not parse.
pub fn age(timestamp: Option<&str>) -> String {
    let Some(then) = timestamp.and_then(|t| humantime::parse_rfc3339(t).ok()) else {
        return "<unknown>".into();
    };
    let elapsed = SystemTime::now()
        .duration_since(then)
        .unwrap_or(Duration::ZERO);
    human_duration(elapsed)
}

/// apimachinery's `HumanDuration`: coarser as durations grow.
pub fn human_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let (minutes, hours, days) = (secs / 60, secs / 3600, secs / 86400);
    if secs < 120 {
        format!("{secs}s")
    } else if minutes < 10 {
        match secs % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        }
    } else if minutes < 180 {
        format!("{minutes}m")
    } else if hours < 8 {
        match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 192 {
        match hours % 24 {
            0 => format!("{days}d"),
            h => format!("{days}d{h}h"),
        }
    } else if days < 730 {
        format!("{days}d")
    } else {
        format!("{}y{}d", days / 365, days % 365)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_kubectl() {
        assert_eq!(human_duration(Duration::from_secs(5)), "5s");
        assert_eq!(human_duration(Duration::from_secs(192)), "3m12s");
        assert_eq!(human_duration(Duration::from_secs(3 * 3600 + 60)), "3h1m");
        assert_eq!(human_duration(Duration::from_secs(3 * 86400)), "3d");
    }
}
