//! One resource's value transformer: its providers in the configuration's
//! order. The first writes; reading picks the provider by the value's
//! prefix (`k8s:enc:<provider>:v1:<key>:`), as kube-apiserver's prefix
//! transformers do, so data written by either server reads on the other.

use std::borrow::Cow;

use super::providers::{CipherError, Key};

/// What every encrypted value starts with.
const ENCRYPTED: &[u8] = b"k8s:enc:";

pub enum Provider {
    /// `aescbc`, `aesgcm` or `secretbox` with its keys, the first writing.
    Keyed {
        /// `k8s:enc:<provider>:v1:`
        prefix: String,
        keys: Vec<Key>,
    },
    /// Values stored as they are.
    Identity,
}

impl Provider {
    pub fn keyed(name: &str, keys: Vec<Key>) -> Provider {
        Provider::Keyed {
            prefix: format!("k8s:enc:{name}:v1:"),
            keys,
        }
    }
}

/// Why a stored value cannot be read (the etcd key is added above).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TransformError {
    /// Encrypted with a key the configuration no longer has.
    #[error("no key named {key:?} is configured for {provider}")]
    UnknownKey { provider: String, key: String },
    #[error("key {key:?} of {provider} does not decrypt the value: {source}")]
    Cipher {
        provider: String,
        key: String,
        source: CipherError,
    },
    /// No provider reads this value (encrypted by a provider that is not
    /// configured, or plain with no identity provider).
    #[error("no matching prefix found ({found:?})")]
    NoMatchingPrefix { found: String },
}

pub struct Transformer {
    providers: Vec<Provider>,
}

impl Transformer {
    pub fn new(providers: Vec<Provider>) -> Transformer {
        Transformer { providers }
    }

    /// Values stored as they are (resources no rule names).
    pub fn identity() -> Transformer {
        Transformer::new(vec![Provider::Identity])
    }

    /// Whether writes are stored as they are.
    pub fn is_identity(&self) -> bool {
        matches!(self.providers.first(), Some(Provider::Identity) | None)
    }

    /// The value to store for `plain` at etcd key `at`.
    pub fn to_storage(&self, plain: Vec<u8>, at: &str) -> Vec<u8> {
        match self.providers.first() {
            Some(Provider::Keyed { prefix, keys }) => {
                let key = &keys[0];
                let sealed = key.cipher.seal(&plain, at.as_bytes());
                let mut value =
                    Vec::with_capacity(prefix.len() + key.name.len() + 1 + sealed.len());
                value.extend_from_slice(prefix.as_bytes());
                value.extend_from_slice(key.name.as_bytes());
                value.push(b':');
                value.extend_from_slice(&sealed);
                value
            }
            Some(Provider::Identity) | None => plain,
        }
    }

    /// The plain value of `stored`, read at etcd key `at`, and whether it
    /// is stale: read by a provider or key that is not the one writing.
    pub fn from_storage<'a>(
        &self,
        stored: &'a [u8],
        at: &str,
    ) -> Result<(Cow<'a, [u8]>, bool), TransformError> {
        for (i, provider) in self.providers.iter().enumerate() {
            match provider {
                // Identity reads only what is not encrypted; an encrypted
                // value goes on to the providers after it (kube's order
                // for migrating away from encryption).
                Provider::Identity if !stored.starts_with(ENCRYPTED) => {
                    return Ok((Cow::Borrowed(stored), i != 0))
                }
                Provider::Identity => {}
                Provider::Keyed { prefix, keys } => {
                    if let Some(rest) = stored.strip_prefix(prefix.as_bytes()) {
                        let (plain, key) = open(prefix, keys, rest, at)?;
                        return Ok((Cow::Owned(plain), i != 0 || key != 0));
                    }
                }
            }
        }
        Err(TransformError::NoMatchingPrefix {
            found: prefix_of(stored),
        })
    }
}

/// The value's `<key>:` prefix picks the key; the plain text, and which
/// key (by its place in the list) opened it.
fn open(
    prefix: &str,
    keys: &[Key],
    rest: &[u8],
    at: &str,
) -> Result<(Vec<u8>, usize), TransformError> {
    let provider = prefix
        .trim_start_matches("k8s:enc:")
        .trim_end_matches(":v1:");
    for (i, key) in keys.iter().enumerate() {
        let named = rest
            .strip_prefix(key.name.as_bytes())
            .and_then(|r| r.strip_prefix(b":"));
        if let Some(sealed) = named {
            let plain = key.cipher.open(sealed, at.as_bytes()).map_err(|source| {
                TransformError::Cipher {
                    provider: provider.to_string(),
                    key: key.name.clone(),
                    source,
                }
            })?;
            return Ok((plain, i));
        }
    }
    let name = rest.split(|b| *b == b':').next().unwrap_or_default();
    Err(TransformError::UnknownKey {
        provider: provider.to_string(),
        key: String::from_utf8_lossy(name).into_owned(),
    })
}

/// The readable start of a value, for errors: `k8s:enc:aescbc:v1:key1`
/// for an encrypted one, else its first bytes.
fn prefix_of(stored: &[u8]) -> String {
    let end = match stored.starts_with(ENCRYPTED) {
        true => stored
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b':')
            .nth(4)
            .map_or(stored.len(), |(i, _)| i),
        false => 0,
    };
    String::from_utf8_lossy(&stored[..end.min(40)]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::super::providers::Cipher;
    use super::*;

    const AT: &str = "/registry/secrets/default/s1";
    const PLAIN: &[u8] = br#"{"kind":"Secret"}"#;

    fn keyed(provider: &str, names: &[(&str, u8)]) -> Provider {
        let keys = names
            .iter()
            .map(|(name, byte)| Key {
                name: name.to_string(),
                cipher: Cipher::new(provider, &[*byte; 32]).unwrap(),
            })
            .collect();
        Provider::keyed(provider, keys)
    }

    #[test]
    fn the_first_provider_writes_with_kube_prefix() {
        let t = Transformer::new(vec![
            keyed("aescbc", &[("key1", 1), ("key2", 2)]),
            Provider::Identity,
        ]);
        let stored = t.to_storage(PLAIN.to_vec(), AT);
        assert!(stored.starts_with(b"k8s:enc:aescbc:v1:key1:"));
        let (plain, stale) = t.from_storage(&stored, AT).unwrap();
        assert_eq!((&*plain, stale), (PLAIN, false));
        // Plain values still read through identity, stale: a rewrite
        // encrypts them.
        let (plain, stale) = t.from_storage(PLAIN, AT).unwrap();
        assert_eq!((&*plain, stale), (PLAIN, true));
        let identity = Transformer::new(vec![Provider::Identity, keyed("aescbc", &[("key1", 1)])]);
        assert_eq!(identity.to_storage(PLAIN.to_vec(), AT), PLAIN);
        let (plain, stale) = identity.from_storage(&stored, AT).unwrap();
        assert_eq!((&*plain, stale), (PLAIN, true));
        assert!(!identity.from_storage(PLAIN, AT).unwrap().1);
    }

    #[test]
    fn every_provider_and_key_reads() {
        let old = Transformer::new(vec![keyed("secretbox", &[("old", 3)])]);
        let stored = old.to_storage(PLAIN.to_vec(), AT);
        let t = Transformer::new(vec![
            keyed("aesgcm", &[("new", 4)]),
            keyed("secretbox", &[("other", 5), ("old", 3)]),
        ]);
        let (plain, stale) = t.from_storage(&stored, AT).unwrap();
        assert_eq!((&*plain, stale), (PLAIN, true));
        // A second key of the writing provider is stale too (rotation).
        let rotating = Transformer::new(vec![keyed("secretbox", &[("new", 6), ("old", 3)])]);
        assert!(rotating.from_storage(&stored, AT).unwrap().1);
        let current = Transformer::new(vec![keyed("secretbox", &[("old", 3), ("new", 6)])]);
        assert!(!current.from_storage(&stored, AT).unwrap().1);
    }

    #[test]
    fn unreadable_values_name_the_key() {
        let t = Transformer::new(vec![keyed("aescbc", &[("key2", 2)])]);
        let by_key1 =
            Transformer::new(vec![keyed("aescbc", &[("key1", 1)])]).to_storage(PLAIN.to_vec(), AT);
        let err = t.from_storage(&by_key1, AT).unwrap_err();
        assert!(err.to_string().contains("\"key1\""), "{err}");
        let plain = t.from_storage(PLAIN, AT).unwrap_err();
        assert!(matches!(plain, TransformError::NoMatchingPrefix { .. }));
        let gcm =
            Transformer::new(vec![keyed("aesgcm", &[("k", 1)])]).to_storage(PLAIN.to_vec(), AT);
        let err = t.from_storage(&gcm, AT).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no matching prefix found (\"k8s:enc:aesgcm:v1:k\")"
        );
        let identity_only = Transformer::identity();
        assert!(identity_only.from_storage(&gcm, AT).is_err());
    }

    #[test]
    fn a_wrong_secret_under_the_same_name_is_an_error() {
        let writer = Transformer::new(vec![keyed("aesgcm", &[("key1", 1)])]);
        let reader = Transformer::new(vec![keyed("aesgcm", &[("key1", 9)])]);
        let stored = writer.to_storage(PLAIN.to_vec(), AT);
        let err = reader.from_storage(&stored, AT).unwrap_err();
        assert!(
            matches!(err, TransformError::Cipher { ref key, .. } if key == "key1"),
            "{err}"
        );
    }
}
