//! etcd's simple tokens: `<16 random letters>.<raft index>`, made when a
//! successful authentication is applied, so every member knows every
//! token (the letters come from the proposer, the index from the log).
//! A token lives `--auth-token-ttl` past its last use, in memory only: a
//! restarted member has none, and clients authenticate again, as with
//! etcd. A user's tokens go when the user is deleted or changes password.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rand::Rng;

/// Letters of a token's random part, and how many.
const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
const PREFIX_LEN: usize = 16;

/// How often expired tokens are swept out, at most.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

struct Issued {
    user: String,
    expires: Instant,
}

struct Table {
    tokens: HashMap<String, Issued>,
    last_sweep: Instant,
}

pub struct SimpleTokens {
    ttl: Duration,
    table: Mutex<Table>,
}

/// The random part of a new token.
pub fn new_prefix() -> String {
    let mut rng = rand::rng();
    (0..PREFIX_LEN)
        .map(|_| LETTERS[rng.random_range(0..LETTERS.len())] as char)
        .collect()
}

/// The raft index a token was made at: a member must have applied that
/// far before it can know the token.
pub fn index_of(token: &str) -> Option<u64> {
    let (prefix, index) = token.split_once('.')?;
    if prefix.len() != PREFIX_LEN || !prefix.bytes().all(|b| b.is_ascii_alphabetic()) {
        return None;
    }
    index.parse().ok()
}

impl SimpleTokens {
    pub fn new(ttl: Duration) -> SimpleTokens {
        SimpleTokens {
            ttl,
            table: Mutex::new(Table {
                tokens: HashMap::new(),
                last_sweep: Instant::now(),
            }),
        }
    }

    /// Records the token of an authentication applied at raft `index`.
    pub fn assign(&self, prefix: &str, index: u64, user: &str, now: Instant) -> String {
        let token = format!("{prefix}.{index}");
        let mut table = self.table.lock();
        if now.duration_since(table.last_sweep) >= SWEEP_EVERY {
            table.tokens.retain(|_, issued| issued.expires > now);
            table.last_sweep = now;
        }
        let issued = Issued {
            user: user.to_string(),
            expires: now + self.ttl,
        };
        table.tokens.insert(token.clone(), issued);
        token
    }

    /// The user a live token names; using it extends its life.
    pub fn user(&self, token: &str, now: Instant) -> Option<String> {
        let mut table = self.table.lock();
        let issued = table.tokens.get_mut(token)?;
        if issued.expires <= now {
            table.tokens.remove(token);
            return None;
        }
        issued.expires = now + self.ttl;
        Some(issued.user.clone())
    }

    pub fn invalidate_user(&self, user: &str) {
        self.table
            .lock()
            .tokens
            .retain(|_, issued| issued.user != user);
    }

    pub fn clear(&self) {
        self.table.lock().tokens.clear();
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.table.lock().tokens.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_names_its_user_until_it_goes_unused_for_the_ttl() {
        let tokens = SimpleTokens::new(Duration::from_secs(10));
        let start = Instant::now();
        let prefix = new_prefix();
        let token = tokens.assign(&prefix, 42, "alice", start);
        assert_eq!(token, format!("{prefix}.42"));
        assert_eq!(index_of(&token), Some(42));
        let later = start + Duration::from_secs(8);
        assert_eq!(tokens.user(&token, later).as_deref(), Some("alice"));
        // Used at 8 s, so it lives until 18 s.
        assert!(tokens
            .user(&token, start + Duration::from_secs(17))
            .is_some());
        assert!(tokens
            .user(&token, start + Duration::from_secs(40))
            .is_none());
        assert!(tokens.user("unknown.1", start).is_none());
    }

    #[test]
    fn expired_tokens_are_swept_and_users_invalidated() {
        let tokens = SimpleTokens::new(Duration::from_secs(1));
        let start = Instant::now();
        tokens.assign(&new_prefix(), 1, "a", start);
        tokens.assign(&new_prefix(), 2, "b", start);
        tokens.invalidate_user("a");
        assert_eq!(tokens.len(), 1);
        tokens.assign(&new_prefix(), 3, "c", start + Duration::from_secs(5));
        assert_eq!(tokens.len(), 1, "b expired and was swept");
    }

    #[test]
    fn only_etcds_shape_has_an_index() {
        assert_eq!(index_of("abcdefghijklmnop.7"), Some(7));
        for bad in [
            "",
            "abc.7",
            "abcdefghijklmnop",
            "abcdefghijklmnop.x",
            "abcdefghijklmn0p.7",
        ] {
            assert_eq!(index_of(bad), None, "{bad}");
        }
    }
}
