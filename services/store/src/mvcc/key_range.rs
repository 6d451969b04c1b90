//! etcd's key-range convention: `[key, range_end)` with two special ends.

/// Which keys a request addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyRange {
    /// Exactly one key (`range_end` empty).
    Single(Vec<u8>),
    /// Every key `>= start` (`range_end` is `"\0"`).
    From(Vec<u8>),
    /// Keys in `[start, end)`. Empty when `end <= start`, as in etcd.
    Between(Vec<u8>, Vec<u8>),
}

impl KeyRange {
    pub fn new(key: &[u8], range_end: &[u8]) -> Self {
        match range_end {
            [] => KeyRange::Single(key.to_vec()),
            [0] => KeyRange::From(key.to_vec()),
            end => KeyRange::Between(key.to_vec(), end.to_vec()),
        }
    }

    pub fn start(&self) -> &[u8] {
        match self {
            KeyRange::Single(k) | KeyRange::From(k) | KeyRange::Between(k, _) => k,
        }
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        match self {
            KeyRange::Single(k) => key == k.as_slice(),
            KeyRange::From(start) => key >= start.as_slice(),
            KeyRange::Between(start, end) => key >= start.as_slice() && key < end.as_slice(),
        }
    }

    /// True if the range addresses no key at all.
    pub fn is_empty(&self) -> bool {
        matches!(self, KeyRange::Between(start, end) if end <= start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_ends() {
        assert!(KeyRange::new(b"a", b"").contains(b"a"));
        assert!(!KeyRange::new(b"a", b"").contains(b"ab"));
        assert!(KeyRange::new(b"a", b"\0").contains(b"zzz"));
        assert!(KeyRange::new(b"\0", b"\0").contains(b"\x01"));
        let prefix = KeyRange::new(b"foo", b"fop");
        assert!(prefix.contains(b"foo/bar") && !prefix.contains(b"fop"));
        assert!(KeyRange::new(b"b", b"a").is_empty());
    }
}
