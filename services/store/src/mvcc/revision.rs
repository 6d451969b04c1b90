//! Revisions and how they are laid out as backend keys.

/// A point in the store's history. `main` is the store revision a write
/// request produced; `sub` orders the changes inside that one request.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Revision {
    pub main: i64,
    pub sub: i64,
}

/// Backend keys of revision records start with this byte.
pub const REVISION_PREFIX: u8 = b'r';
const KEY_LEN: usize = 17;

impl Revision {
    pub fn new(main: i64, sub: i64) -> Self {
        Revision { main, sub }
    }

    /// The backend key: prefix, then main and sub big-endian, so that byte
    /// order is revision order.
    pub fn to_key(self) -> [u8; KEY_LEN] {
        let mut key = [0u8; KEY_LEN];
        key[0] = REVISION_PREFIX;
        key[1..9].copy_from_slice(&(self.main as u64).to_be_bytes());
        key[9..17].copy_from_slice(&(self.sub as u64).to_be_bytes());
        key
    }

    pub fn from_key(key: &[u8]) -> Option<Self> {
        if key.len() != KEY_LEN || key[0] != REVISION_PREFIX {
            return None;
        }
        let main = u64::from_be_bytes(key[1..9].try_into().ok()?) as i64;
        let sub = u64::from_be_bytes(key[9..17].try_into().ok()?) as i64;
        Some(Revision { main, sub })
    }

    /// The first backend key of store revision `main`.
    pub fn first_key_of(main: i64) -> [u8; KEY_LEN] {
        Revision::new(main, 0).to_key()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_is_revision_order() {
        let a = Revision::new(2, 5).to_key();
        let b = Revision::new(3, 0).to_key();
        let c = Revision::new(3, 1).to_key();
        assert!(a < b && b < c);
        assert_eq!(Revision::from_key(&c), Some(Revision::new(3, 1)));
        assert_eq!(Revision::from_key(b"m/x"), None);
    }
}
