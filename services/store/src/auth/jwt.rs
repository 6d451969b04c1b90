//! etcd's JWT tokens (`--auth-token jwt,pub-key=...,priv-key=...,
//! sign-method=...,ttl=...`): signed claims `username`, `revision` (the
//! auth revision when it was issued) and `exp`. Any member holding the
//! public key verifies a token without asking anyone, so nothing about
//! them is replicated; a token issued before the rules changed is refused
//! as old, and the client authenticates again. With only a public key a
//! member verifies tokens but cannot issue them.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::config::parse_duration;
use crate::error::{Result, StoreError};

/// etcd's default when `ttl` is not given.
const DEFAULT_TTL: Duration = Duration::from_secs(5 * 60);

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    username: String,
    revision: u64,
    exp: u64,
}

pub struct JwtTokens {
    algorithm: Algorithm,
    /// None when only a public key was given.
    encoding: Option<EncodingKey>,
    decoding: DecodingKey,
    validation: Validation,
    ttl: Duration,
}

impl std::fmt::Debug for JwtTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtTokens")
            .field("algorithm", &self.algorithm)
            .field("signs", &self.encoding.is_some())
            .field("ttl", &self.ttl)
            .finish()
    }
}

impl JwtTokens {
    /// From the options after `jwt,` in `--auth-token`; keys are read
    /// from the files they name. The error says what is wrong.
    pub fn from_options(options: &BTreeMap<String, String>) -> std::result::Result<Self, String> {
        for name in options.keys() {
            if !["sign-method", "pub-key", "priv-key", "ttl"].contains(&name.as_str()) {
                return Err(format!("unknown JWT option {name:?}"));
            }
        }
        let method = options.get("sign-method").map_or("", String::as_str);
        let algorithm: Algorithm = method
            .parse()
            .map_err(|_| format!("auth: invalid auth signature method {method:?}"))?;
        let ttl = match options.get("ttl") {
            Some(text) => parse_duration(text).ok_or_else(|| format!("JWT ttl {text:?}"))?,
            None => DEFAULT_TTL,
        };
        let read = |name: &str| -> std::result::Result<Option<Vec<u8>>, String> {
            let Some(path) = options.get(name) else {
                return Ok(None);
            };
            std::fs::read(path)
                .map(Some)
                .map_err(|err| format!("JWT {name} {path}: {err}"))
        };
        let (private, public) = (read("priv-key")?, read("pub-key")?);
        let (encoding, decoding) = keys(algorithm, private, public)?;
        let mut validation = Validation::new(algorithm);
        validation.leeway = 0;
        validation.set_required_spec_claims(&["exp"]);
        let tokens = JwtTokens {
            algorithm,
            encoding,
            decoding,
            validation,
            ttl,
        };
        tokens.check_key_pair()?;
        Ok(tokens)
    }

    /// A key pair that does not belong together would issue tokens no
    /// member accepts: found at start by signing and verifying one.
    fn check_key_pair(&self) -> std::result::Result<(), String> {
        if self.encoding.is_none() {
            return Ok(());
        }
        let probe = self.sign("key-pair-check", 1).map_err(|e| e.to_string())?;
        match self.verify(&probe) {
            Some(_) => Ok(()),
            None => Err("auth: public and private keys don't match".into()),
        }
    }

    pub fn sign(&self, user: &str, revision: u64) -> Result<String> {
        let key = self.encoding.as_ref().ok_or(StoreError::VerifyOnly)?;
        let exp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .saturating_add(self.ttl)
            .as_secs();
        let claims = Claims {
            username: user.to_string(),
            revision,
            exp,
        };
        jsonwebtoken::encode(&Header::new(self.algorithm), &claims, key)
            .map_err(|err| StoreError::Storage(format!("signing a JWT: {err}")))
    }

    /// The user and auth revision of a valid, unexpired token.
    pub fn verify(&self, token: &str) -> Option<(String, u64)> {
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation).ok()?;
        Some((data.claims.username, data.claims.revision))
    }
}

type KeyPair = (Option<EncodingKey>, DecodingKey);

fn keys(
    algorithm: Algorithm,
    private: Option<Vec<u8>>,
    public: Option<Vec<u8>>,
) -> std::result::Result<KeyPair, String> {
    use Algorithm::*;
    let bad = |err: jsonwebtoken::errors::Error| format!("JWT key: {err}");
    if matches!(algorithm, HS256 | HS384 | HS512) {
        let secret = private.ok_or("auth: missing key data (priv-key)")?;
        return Ok((
            Some(EncodingKey::from_secret(&secret)),
            DecodingKey::from_secret(&secret),
        ));
    }
    let public = public.ok_or("auth: missing key data (pub-key)")?;
    let (encoding, decoding) = match algorithm {
        RS256 | RS384 | RS512 | PS256 | PS384 | PS512 => (
            private
                .map(|key| EncodingKey::from_rsa_pem(&key))
                .transpose(),
            DecodingKey::from_rsa_pem(&public),
        ),
        ES256 | ES384 => (
            private
                .map(|key| EncodingKey::from_ec_pem(&key))
                .transpose(),
            DecodingKey::from_ec_pem(&public),
        ),
        EdDSA => (
            private
                .map(|key| EncodingKey::from_ed_pem(&key))
                .transpose(),
            DecodingKey::from_ed_pem(&public),
        ),
        HS256 | HS384 | HS512 => unreachable!("handled above"),
    };
    Ok((encoding.map_err(bad)?, decoding.map_err(bad)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn hmac(dir: &std::path::Path, secret: &str) -> JwtTokens {
        let key = dir.join(format!("{secret}.key"));
        std::fs::write(&key, secret).unwrap();
        let key = key.display().to_string();
        JwtTokens::from_options(&options(&[("sign-method", "HS256"), ("priv-key", &key)])).unwrap()
    }

    #[test]
    fn a_signed_token_carries_user_and_revision_and_only_its_key_verifies_it() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = hmac(dir.path(), "one");
        let token = tokens.sign("alice", 7).unwrap();
        assert_eq!(tokens.verify(&token), Some(("alice".to_string(), 7)));
        assert_eq!(hmac(dir.path(), "two").verify(&token), None);
        assert_eq!(tokens.verify("not.a.token"), None);
    }

    #[test]
    fn an_expired_token_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut tokens = hmac(dir.path(), "k");
        tokens.ttl = Duration::ZERO;
        let token = tokens.sign("alice", 1).unwrap();
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(tokens.verify(&token), None);
    }

    #[test]
    fn bad_options_are_named() {
        let err = JwtTokens::from_options(&options(&[("sign-method", "XX1")])).unwrap_err();
        assert!(err.contains("signature method"), "{err}");
        let err = JwtTokens::from_options(&options(&[("sign-method", "RS256")])).unwrap_err();
        assert!(err.contains("missing key data"), "{err}");
        let err = JwtTokens::from_options(&options(&[("sign-methd", "RS256")])).unwrap_err();
        assert!(err.contains("unknown JWT option"), "{err}");
    }
}
