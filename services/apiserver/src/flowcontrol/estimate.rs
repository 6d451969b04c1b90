//! The work estimator: how many seats a request occupies while it runs.
//! A list costs a seat per 100 objects it must go through (from the
//! caller's estimate of how many the server holds), between 1 and 10 and
//! at most the level's per-request maximum; everything else costs one.
//! kube also has a watcher-based estimate for writes but keeps it
//! switched off; so does this one.

use super::digest::{ListShape, RequestDigest, Target};

pub const MIN_SEATS: u32 = 1;
/// No request is wider than this, whatever its level allows.
pub const MAX_SEATS: u32 = 10;
const OBJECTS_PER_SEAT: f64 = 100.0;

/// Seats for `digest` at a level whose per-request maximum is
/// `level_max`.
pub fn seats(digest: &RequestDigest, shape: &ListShape, level_max: u32) -> u32 {
    let max = level_max.clamp(MIN_SEATS, MAX_SEATS);
    let single = match &digest.target {
        Target::Resource(r) => r.name.is_some(),
        Target::NonResource { .. } => return MIN_SEATS,
    };
    let objects = match digest.verb.as_str() {
        "list" => objects_processed(shape, single, shape.from_cache),
        "watch" if shape.initial_events => objects_processed(shape, single, true),
        _ => return MIN_SEATS,
    };
    let Some(objects) = objects else {
        return MIN_SEATS;
    };
    ((objects as f64 / OBJECTS_PER_SEAT).ceil() as u64).clamp(MIN_SEATS as u64, max as u64) as u32
}

/// How many objects a list goes through: one for a named object, all of
/// them from the cache or when filtering, twice the page otherwise (the
/// store reads a page and decodes it). None when the count is unknown.
fn objects_processed(shape: &ListShape, single: bool, from_cache: bool) -> Option<u64> {
    let stored = shape.object_count?;
    let page = match shape.limit {
        Some(limit) if limit > 0 && limit < stored => limit,
        _ => stored,
    };
    Some(if single {
        1
    } else if from_cache {
        stored
    } else if shape.filtered {
        stored + page
    } else {
        2 * page
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flowcontrol::digest::ResourceTarget;

    fn pods(verb: &str) -> RequestDigest {
        RequestDigest::resource("alice", &[], verb, "", "pods", "a")
    }

    fn counted(count: u64) -> ListShape {
        ListShape {
            object_count: Some(count),
            ..ListShape::default()
        }
    }

    #[test]
    fn lists_cost_by_the_objects_they_go_through() {
        // From the store: twice the page.
        assert_eq!(seats(&pods("list"), &counted(250), 10), 5);
        let page = ListShape {
            limit: Some(100),
            ..counted(10_000)
        };
        assert_eq!(seats(&pods("list"), &page, 10), 2);
        // From the cache: all the objects.
        let cached = ListShape {
            from_cache: true,
            limit: Some(100),
            ..counted(450)
        };
        assert_eq!(seats(&pods("list"), &cached, 10), 5);
        // Filtering goes through everything plus the page.
        let filtered = ListShape {
            filtered: true,
            limit: Some(50),
            ..counted(250)
        };
        assert_eq!(seats(&pods("list"), &filtered, 10), 3);
        // Capped by the level and by the estimator's maximum.
        assert_eq!(seats(&pods("list"), &counted(30_000), 4), 4);
        assert_eq!(seats(&pods("list"), &counted(30_000), u32::MAX), 10);
        // Never below one.
        assert_eq!(seats(&pods("list"), &counted(0), 10), 1);
    }

    #[test]
    fn other_requests_cost_one_seat() {
        assert_eq!(
            seats(&pods("list"), &ListShape::default(), 10),
            1,
            "count unknown"
        );
        assert_eq!(seats(&pods("create"), &counted(30_000), 10), 1);
        assert_eq!(seats(&pods("watch"), &counted(30_000), 10), 1);
        let initial = ListShape {
            initial_events: true,
            ..counted(30_000)
        };
        assert_eq!(seats(&pods("watch"), &initial, 10), 10);
        let mut named = pods("list");
        if let Target::Resource(ResourceTarget { name, .. }) = &mut named.target {
            *name = Some("p".into());
        }
        assert_eq!(seats(&named, &counted(30_000), 10), 1);
        let metrics = RequestDigest::non_resource("alice", &[], "get", "/metrics");
        assert_eq!(seats(&metrics, &counted(30_000), 10), 1);
    }
}
