//! Which tokens a member issues and accepts (`--auth-token`): etcd's
//! `simple` (the default) or `jwt,<options>`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::jwt::JwtTokens;
use super::simple::{self, SimpleTokens};
use crate::error::Result;

pub enum Tokens {
    Simple(SimpleTokens),
    Jwt(Box<JwtTokens>),
}

impl Tokens {
    /// From `--auth-token` (`simple`, or `jwt,sign-method=...,...`) and,
    /// for simple tokens, `--auth-token-ttl`.
    pub fn from_setting(
        setting: &str,
        simple_ttl: Duration,
    ) -> std::result::Result<Tokens, String> {
        let mut parts = setting.split(',');
        let kind = parts.next().unwrap_or_default().trim();
        let mut options = BTreeMap::new();
        for part in parts {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| format!("auth: invalid auth options: {part:?} is not name=value"))?;
            if options
                .insert(name.trim().to_string(), value.trim().to_string())
                .is_some()
            {
                return Err(format!("auth: invalid auth options: {name} given twice"));
            }
        }
        match kind {
            "simple" if options.is_empty() => Ok(Tokens::Simple(SimpleTokens::new(simple_ttl))),
            "simple" => Err("auth: simple tokens take no options".into()),
            "jwt" => JwtTokens::from_options(&options).map(|jwt| Tokens::Jwt(Box::new(jwt))),
            other => Err(format!(
                "auth: unknown token type {other:?} (simple or jwt)"
            )),
        }
    }

    /// The random part the proposer of an authentication picks (simple
    /// tokens only; JWTs are signed once the authentication is applied).
    pub fn new_prefix(&self) -> String {
        match self {
            Tokens::Simple(_) => simple::new_prefix(),
            Tokens::Jwt(_) => String::new(),
        }
    }

    /// The raft index a member must have applied to know `token`.
    pub fn index_of(&self, token: &str) -> Option<u64> {
        match self {
            Tokens::Simple(_) => simple::index_of(token),
            Tokens::Jwt(_) => None,
        }
    }

    /// Records a simple token when its authentication is applied; None
    /// for JWTs.
    pub fn assign(&self, prefix: &str, index: u64, user: &str) -> Option<String> {
        match self {
            Tokens::Simple(simple) if !prefix.is_empty() => {
                Some(simple.assign(prefix, index, user, Instant::now()))
            }
            _ => None,
        }
    }

    /// A JWT for `user`, for the proposer to hand out; None with simple
    /// tokens, whose token is made by the apply.
    pub fn sign(&self, user: &str, revision: u64) -> Result<Option<String>> {
        match self {
            Tokens::Simple(_) => Ok(None),
            Tokens::Jwt(jwt) => jwt.sign(user, revision).map(Some),
        }
    }

    /// The user a token names and, for a JWT, the auth revision it was
    /// issued at (None: take the current one).
    pub fn user(&self, token: &str) -> Option<(String, Option<u64>)> {
        match self {
            Tokens::Simple(simple) => simple.user(token, Instant::now()).map(|u| (u, None)),
            Tokens::Jwt(jwt) => jwt.verify(token).map(|(u, rev)| (u, Some(rev))),
        }
    }

    pub fn invalidate_user(&self, user: &str) {
        if let Tokens::Simple(simple) = self {
            simple.invalidate_user(user);
        }
    }

    pub fn clear(&self) {
        if let Tokens::Simple(simple) = self {
            simple.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_takes_etcds_forms() {
        let ttl = Duration::from_secs(300);
        assert!(matches!(
            Tokens::from_setting("simple", ttl),
            Ok(Tokens::Simple(_))
        ));
        for bad in [
            "",
            "opaque",
            "simple,x=1",
            "jwt,sign-method",
            "jwt,ttl=1s,ttl=2s",
        ] {
            assert!(Tokens::from_setting(bad, ttl).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_simple_token_is_made_by_the_apply_and_found_again() {
        let tokens = Tokens::from_setting("simple", Duration::from_secs(60)).unwrap();
        let prefix = tokens.new_prefix();
        let token = tokens.assign(&prefix, 9, "bob").unwrap();
        assert_eq!(tokens.index_of(&token), Some(9));
        assert_eq!(tokens.user(&token), Some(("bob".to_string(), None)));
        tokens.invalidate_user("bob");
        assert_eq!(tokens.user(&token), None);
    }
}
