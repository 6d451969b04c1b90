//! What one user may read and write: the key ranges of all its roles'
//! permissions, merged into disjoint intervals so that a check is one
//! binary search. A range is allowed only if one interval covers all of
//! it, which is the same as the union of the role permissions covering it
//! (merging joins intervals that overlap or touch).
//!
//! Ranges follow etcd's conventions: an empty end names the key alone,
//! an end of `"\0"` runs to the end of the key space, and a permission on
//! key `"\0"` to `"\0"` covers every key.

use capstan_proto::authpb::permission::Type as PermissionType;
use capstan_proto::authpb::Permission;

/// The end of an interval; `None` is past every key.
type End = Option<Vec<u8>>;

/// A half-open interval of keys, `[begin, end)`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Interval {
    begin: Vec<u8>,
    end: End,
}

impl Interval {
    /// The interval a key and range end name, or None for an empty range.
    fn of(key: &[u8], range_end: &[u8]) -> Option<Interval> {
        let end = match range_end {
            [] => Some(point_end(key)),
            [0] => None,
            end if end > key => Some(end.to_vec()),
            _ => return None,
        };
        Some(Interval {
            begin: key.to_vec(),
            end,
        })
    }

    /// Whether `self` reaches at least to `end`.
    fn reaches(&self, end: &End) -> bool {
        match (&self.end, end) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(mine), Some(theirs)) => mine >= theirs,
        }
    }
}

/// The smallest key after `key`: the end of the interval of `key` alone.
fn point_end(key: &[u8]) -> Vec<u8> {
    let mut end = Vec::with_capacity(key.len() + 1);
    end.extend_from_slice(key);
    end.push(0);
    end
}

/// Disjoint, non-touching intervals in key order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct IntervalSet {
    intervals: Vec<Interval>,
}

impl IntervalSet {
    fn from_unsorted(mut intervals: Vec<Interval>) -> IntervalSet {
        intervals.sort_by(|a, b| a.begin.cmp(&b.begin));
        let mut merged: Vec<Interval> = Vec::with_capacity(intervals.len());
        for next in intervals {
            match merged.last_mut() {
                Some(last) if last.reaches(&Some(next.begin.clone())) => {
                    if !last.reaches(&next.end) {
                        last.end = next.end;
                    }
                }
                _ => merged.push(next),
            }
        }
        IntervalSet { intervals: merged }
    }

    /// Whether one interval holds all of `wanted`.
    fn covers(&self, wanted: &Interval) -> bool {
        // The last interval that begins at or before the wanted begin is
        // the only one that can cover it: the intervals are disjoint.
        let after = self
            .intervals
            .partition_point(|interval| interval.begin <= wanted.begin);
        let Some(candidate) = after.checked_sub(1).map(|i| &self.intervals[i]) else {
            return false;
        };
        candidate.reaches(&wanted.end)
    }
}

/// A user's merged permissions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangePermissions {
    read: IntervalSet,
    write: IntervalSet,
}

/// Whether a request reads or writes the keys it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

impl RangePermissions {
    /// Merges the permissions of every role a user holds.
    pub fn merge<'a>(permissions: impl IntoIterator<Item = &'a Permission>) -> RangePermissions {
        let (mut read, mut write) = (Vec::new(), Vec::new());
        for permission in permissions {
            let Some(interval) = Interval::of(&permission.key, &permission.range_end) else {
                continue;
            };
            match permission.perm_type() {
                PermissionType::Read => read.push(interval),
                PermissionType::Write => write.push(interval),
                PermissionType::Readwrite => {
                    read.push(interval.clone());
                    write.push(interval);
                }
            }
        }
        RangePermissions {
            read: IntervalSet::from_unsorted(read),
            write: IntervalSet::from_unsorted(write),
        }
    }

    /// Whether `access` to `[key, range_end)` (etcd's range conventions)
    /// is allowed. An empty range (an end at or before the key) is not:
    /// nothing legitimate asks for one.
    pub fn allows(&self, access: Access, key: &[u8], range_end: &[u8]) -> bool {
        let Some(wanted) = Interval::of(key, range_end) else {
            return false;
        };
        match access {
            Access::Read => self.read.covers(&wanted),
            Access::Write => self.write.covers(&wanted),
        }
    }
}

/// Whether a permission's range is one etcd accepts: a key, and an end
/// that is empty (the key alone), after the key, or `"\0"` (open).
pub fn is_valid_range(key: &[u8], range_end: &[u8]) -> bool {
    !key.is_empty() && (range_end.is_empty() || range_end == [0] || range_end > key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn perm(kind: PermissionType, key: &str, end: &str) -> Permission {
        Permission {
            perm_type: kind as i32,
            key: key.as_bytes().to_vec(),
            range_end: end.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_prefix_allows_its_keys_and_ranges_and_nothing_outside() {
        let perms =
            RangePermissions::merge(&[perm(PermissionType::Readwrite, "/registry/", "/registry0")]);
        for access in [Access::Read, Access::Write] {
            assert!(perms.allows(access, b"/registry/pods/a", b""));
            assert!(perms.allows(access, b"/registry/", b"/registry0"));
            assert!(perms.allows(access, b"/registry/pods/", b"/registry/pods0"));
            assert!(
                !perms.allows(access, b"/registry", b""),
                "the prefix without its slash"
            );
            assert!(!perms.allows(access, b"/other", b""));
            assert!(
                !perms.allows(access, b"/registry/", b"\0"),
                "open-ended reaches past it"
            );
            assert!(
                !perms.allows(access, b"/", b"/registry0"),
                "starts before it"
            );
            assert!(!perms.allows(access, b"\0", b"\0"), "everything");
        }
    }

    #[test]
    fn read_and_write_are_separate() {
        let perms = RangePermissions::merge(&[
            perm(PermissionType::Read, "a", "c"),
            perm(PermissionType::Write, "k", ""),
        ]);
        assert!(perms.allows(Access::Read, b"b", b""));
        assert!(!perms.allows(Access::Write, b"b", b""));
        assert!(perms.allows(Access::Write, b"k", b""));
        assert!(
            !perms.allows(Access::Write, b"k", b"l"),
            "k alone, not what follows it"
        );
        assert!(!perms.allows(Access::Read, b"k", b""));
    }

    #[test]
    fn touching_and_overlapping_permissions_merge_into_one_cover() {
        let perms = RangePermissions::merge(&[
            perm(PermissionType::Read, "c", "e"),
            perm(PermissionType::Read, "a", "c"),
            perm(PermissionType::Read, "d", "g"),
            perm(PermissionType::Read, "x", "\0"),
        ]);
        assert!(perms.allows(Access::Read, b"a", b"g"));
        assert!(!perms.allows(Access::Read, b"a", b"h"));
        assert!(perms.allows(Access::Read, b"y", b"\0"));
        assert!(perms.allows(Access::Read, b"zzz", b""));
        assert!(!perms.allows(Access::Read, b"h", b""));
    }

    #[test]
    fn every_key_and_empty_ranges() {
        let all = RangePermissions::merge(&[perm(PermissionType::Readwrite, "\0", "\0")]);
        assert!(all.allows(Access::Write, b"\0", b"\0"));
        assert!(all.allows(Access::Read, b"anything", b""));
        assert!(
            !all.allows(Access::Read, b"b", b"a"),
            "an empty range is refused"
        );
        assert!(!RangePermissions::default().allows(Access::Read, b"a", b""));
    }

    #[test]
    fn valid_ranges_are_etcds() {
        assert!(is_valid_range(b"a", b""));
        assert!(is_valid_range(b"a", b"b"));
        assert!(is_valid_range(b"a", b"\0"));
        assert!(!is_valid_range(b"", b""));
        assert!(!is_valid_range(b"b", b"a"));
        assert!(!is_valid_range(b"a", b"a"));
    }
}
