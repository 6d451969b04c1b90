//! Keys whose stored value the cache cannot read (encrypted with a key no
//! longer configured, a wrong key, tampered or malformed data). They are
//! not objects the cache can serve, but they are not absent either: a read
//! of such a key, or a list over it, answers the error naming the key
//! (kube's 500 "unable to transform key"), until the key is written again
//! or deleted. Without this a single unreadable value would stop the
//! type's cache from filling, or vanish from it silently.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::storage::StorageError;

#[derive(Debug, Default)]
pub struct Unreadable(BTreeMap<String, StorageError>);

impl Unreadable {
    pub fn new(keys: impl IntoIterator<Item = (String, StorageError)>) -> Unreadable {
        Unreadable(keys.into_iter().collect())
    }

    pub fn insert(&mut self, key: &str, error: StorageError) {
        self.0.insert(key.to_string(), error);
    }

    /// The key is readable again (written anew) or gone.
    pub fn remove(&mut self, key: &str) {
        self.0.remove(key);
    }

    pub fn get(&self, key: &str) -> Option<&StorageError> {
        self.0.get(key)
    }

    /// The error of the first unreadable key under `prefix`.
    pub fn under(&self, prefix: &str) -> Option<StorageError> {
        self.keys_under(prefix).next().map(|(_, e)| e.clone())
    }

    pub fn count_under(&self, prefix: &str) -> usize {
        self.keys_under(prefix).count()
    }

    fn keys_under<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = (&'a String, &'a StorageError)> + 'a {
        self.0
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(move |(key, _)| key.starts_with(prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(key: &str) -> StorageError {
        StorageError::Transform {
            key: key.into(),
            reason: "no key named \"key1\" is configured for aescbc".into(),
        }
    }

    #[test]
    fn answers_for_keys_and_prefixes_until_cleared() {
        let key = "/registry/secrets/ns1/s1";
        let mut unreadable = Unreadable::new([(key.to_string(), error(key))]);
        assert_eq!(unreadable.get(key), Some(&error(key)));
        assert_eq!(unreadable.under("/registry/secrets/"), Some(error(key)));
        assert_eq!(unreadable.under("/registry/secrets/ns1/"), Some(error(key)));
        assert_eq!(unreadable.under("/registry/secrets/ns2/"), None);
        assert_eq!(unreadable.count_under("/registry/secrets/"), 1);
        unreadable.remove(key);
        assert_eq!(unreadable.get(key), None);
        assert_eq!(unreadable.under("/registry/"), None);
    }
}
