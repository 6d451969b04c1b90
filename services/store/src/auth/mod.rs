//! etcd's access control: users with bcrypt passwords (or none, for
//! users named by a client certificate), roles holding READ, WRITE or
//! READWRITE on a key or a range, `root`, and tokens (`simple` or JWT).
//!
//! The rules ([`AuthState`]) change only by applying committed raft
//! entries, so every member holds the same ones at the same log index;
//! they are written with their entry in the MVCC space (`records.rs`) and
//! so survive restarts and travel in snapshots. Every request a client
//! sends carries a [`Caller`]: who it is and the auth revision it was
//! checked at. Writes are checked when applied, against the rules of that
//! point in the log; reads and watches when served ([`Checker`]).

mod jwt;
mod password;
mod permissions;
mod records;
mod simple;
mod state;
mod tokens;

use std::time::Duration;

use capstan_proto::internal::Caller;
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

pub use password::{Passwords, DEFAULT_COST as DEFAULT_BCRYPT_COST, MAX_COST, MIN_COST};
pub use permissions::{Access, RangePermissions};
pub use records::{
    role_key, user_key, Records, META_AUTH_ENABLED, META_AUTH_REVISION, ROLE_PREFIX, USER_PREFIX,
};
pub use state::{has_root_role, AuthState, ROOT};
pub use tokens::Tokens;

use crate::error::{Result, StoreError};
use crate::storage::Backend;

/// etcd's `--auth-token`, `--auth-token-ttl` and `--bcrypt-cost`.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthSettings {
    pub token: String,
    pub token_ttl: Duration,
    pub bcrypt_cost: u32,
}

impl Default for AuthSettings {
    fn default() -> Self {
        AuthSettings {
            token: "simple".into(),
            token_ttl: Duration::from_secs(300),
            bcrypt_cost: DEFAULT_BCRYPT_COST,
        }
    }
}

/// `etcd_debugging_auth_revision`, and failed password checks (a count
/// worth watching for guessing).
#[derive(Clone, Default)]
pub struct AuthMetrics {
    pub revision: Gauge,
    pub failed_authentications: Counter,
}

impl AuthMetrics {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "debugging_auth_revision",
            "The current revision of the access rules (etcd_debugging_auth_revision)",
            self.revision.clone(),
        );
        registry.register(
            "auth_failed_authentications",
            "Authentications refused for a wrong user name or password",
            self.failed_authentications.clone(),
        );
    }
}

/// A successful authentication as applied: the token, for simple tokens
/// (the proposer signs a JWT itself), and the auth revision it happened at.
#[derive(Debug, Clone, PartialEq)]
pub struct Authenticated {
    pub user: String,
    pub revision: u64,
    pub simple_token: Option<String>,
}

pub struct AuthStore {
    /// Taken after the lessor's lock by whoever holds both: the applier
    /// changes the rules while it holds the lessor.
    state: RwLock<AuthState>,
    tokens: Tokens,
    passwords: Passwords,
    metrics: AuthMetrics,
}

impl AuthStore {
    /// The rules the backend holds, with tokens and passwords as set.
    pub fn open(backend: &dyn Backend, settings: &AuthSettings) -> Result<AuthStore> {
        let tokens = Tokens::from_setting(&settings.token, settings.token_ttl)
            .map_err(|err| StoreError::Config(format!("--auth-token: {err}")))?;
        if !(MIN_COST..=MAX_COST).contains(&settings.bcrypt_cost) {
            return Err(StoreError::Config(format!(
                "--bcrypt-cost {} is outside {MIN_COST}..={MAX_COST}",
                settings.bcrypt_cost
            )));
        }
        let store = AuthStore {
            state: RwLock::new(AuthState::default()),
            tokens,
            passwords: Passwords::new(settings.bcrypt_cost),
            metrics: AuthMetrics::default(),
        };
        store.reload(backend)?;
        Ok(store)
    }

    /// Reads the rules again (at start, after a snapshot install).
    pub fn reload(&self, backend: &dyn Backend) -> Result<()> {
        let loaded = AuthState::load(backend)?;
        self.metrics.revision.set(loaded.revision as i64);
        *self.state.write() = loaded;
        Ok(())
    }

    pub fn metrics(&self) -> &AuthMetrics {
        &self.metrics
    }

    pub fn tokens(&self) -> &Tokens {
        &self.tokens
    }

    pub fn passwords(&self) -> &Passwords {
        &self.passwords
    }

    pub fn is_enabled(&self) -> bool {
        self.state.read().enabled
    }

    pub fn revision(&self) -> u64 {
        self.state.read().revision
    }

    /// The rules as they are now, for listings.
    pub fn read(&self) -> RwLockReadGuard<'_, AuthState> {
        self.state.read()
    }

    /// Checks `caller`'s requests against the rules as they are now.
    pub fn checker<'a>(&'a self, caller: &'a Caller) -> Checker<'a> {
        Checker {
            state: self.state.read(),
            caller,
        }
    }

    /// Changes the rules from an applied entry; the caller writes the
    /// records `change` hands to its view.
    pub fn change<T>(&self, change: impl FnOnce(&mut AuthState) -> Result<T>) -> Result<T> {
        let mut state: RwLockWriteGuard<'_, AuthState> = self.state.write();
        let result = change(&mut state);
        self.metrics.revision.set(state.revision as i64);
        result
    }

    /// The identity a token names, as of now: for a simple token the
    /// current auth revision, for a JWT the one it was issued at.
    pub fn caller_from_token(&self, token: &str) -> Result<Caller> {
        let (username, issued_at) = self
            .tokens
            .user(token)
            .ok_or(StoreError::InvalidAuthToken)?;
        Ok(Caller {
            username,
            auth_revision: issued_at.unwrap_or_else(|| self.revision()),
        })
    }

    /// The identity a verified client certificate's common name gives.
    pub fn caller_from_certificate(&self, common_name: &str) -> Caller {
        Caller {
            username: common_name.to_string(),
            auth_revision: self.revision(),
        }
    }

    /// Checks a password; returns the auth revision it was checked at,
    /// so that the proposer can tell whether the rules changed before
    /// its authentication was applied.
    pub async fn check_password(&self, name: &str, password: String) -> Result<u64> {
        let (hash, revision) = {
            let state = self.state.read();
            if !state.enabled {
                return Err(StoreError::AuthNotEnabled);
            }
            let user = state.user(name);
            let no_password =
                user.is_some_and(|u| u.options.as_ref().is_some_and(|o| o.no_password));
            match user {
                Some(user) if !no_password => (user.password.clone(), state.revision),
                _ => return Err(self.failed()),
            }
        };
        if self.passwords.verify(password, hash).await? {
            Ok(revision)
        } else {
            Err(self.failed())
        }
    }

    fn failed(&self) -> StoreError {
        self.metrics.failed_authentications.inc();
        StoreError::AuthFailed
    }

    /// Applies a successful password check, replicated: at raft `index`,
    /// with the proposer's random `prefix` for a simple token.
    pub fn authenticate(&self, name: &str, prefix: &str, index: u64) -> Result<Authenticated> {
        let state = self.state.read();
        if !state.enabled {
            return Err(StoreError::AuthNotEnabled);
        }
        let user = state.user(name).ok_or(StoreError::AuthFailed)?;
        if user.options.as_ref().is_some_and(|o| o.no_password) {
            return Err(StoreError::AuthFailed);
        }
        Ok(Authenticated {
            user: name.to_string(),
            revision: state.revision,
            simple_token: self.tokens.assign(prefix, index, name),
        })
    }
}

/// Checks one caller's requests against one view of the rules, etcd's
/// way: with auth off everything is allowed; with it on, a request needs
/// an identity checked at the current auth revision, and root may do
/// anything.
pub struct Checker<'a> {
    state: RwLockReadGuard<'a, AuthState>,
    caller: &'a Caller,
}

impl Checker<'_> {
    pub fn enabled(&self) -> bool {
        self.state.enabled
    }

    /// Whether the caller gave an identity, checked under these rules.
    pub fn identified(&self) -> Result<()> {
        if !self.state.enabled {
            return Ok(());
        }
        if self.caller.auth_revision == 0 || self.caller.username.is_empty() {
            return Err(StoreError::UserEmpty);
        }
        if self.caller.auth_revision < self.state.revision {
            return Err(StoreError::AuthOldRevision);
        }
        Ok(())
    }

    /// Whether the caller may read or write `[key, range_end)`.
    pub fn allows(&self, access: Access, key: &[u8], range_end: &[u8]) -> Result<()> {
        self.identified()?;
        if !self.state.enabled || self.is_root() {
            return Ok(());
        }
        let permissions = self
            .state
            .permissions(&self.caller.username)
            .ok_or(StoreError::PermissionDenied)?;
        if permissions.allows(access, key, range_end) {
            Ok(())
        } else {
            Err(StoreError::PermissionDenied)
        }
    }

    /// Whether the caller may administer the store (holds `root`).
    pub fn admin(&self) -> Result<()> {
        if !self.state.enabled {
            return Ok(());
        }
        if self.caller.username.is_empty() {
            return Err(StoreError::UserEmpty);
        }
        match self.state.user(&self.caller.username) {
            None => Err(StoreError::UserNotFound),
            Some(user) if has_root_role(user) => Ok(()),
            Some(_) => Err(StoreError::PermissionDenied),
        }
    }

    pub fn is_root(&self) -> bool {
        self.state.is_root(&self.caller.username)
    }

    /// The auth revision these rules are at.
    pub fn revision(&self) -> u64 {
        self.state.revision
    }

    /// Whether the caller holds `role` (which lets it read the role).
    pub fn caller_holds_role(&self, role: &str) -> bool {
        self.state
            .user(&self.caller.username)
            .is_some_and(|user| user.roles.iter().any(|r| r == role))
    }
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
