//! Service-account tokens: signed JWTs that the API server issues
//! (TokenRequest) and accepts (the service-account authenticator), and
//! the issuer discovery documents that let others verify them.

pub mod claims;
pub mod keys;

use jsonwebtoken::{Header, Validation};
use serde_json::{json, Value};

pub use claims::{Binding, Claims, ObjectRef};
use keys::{KeyError, SigningKey, VerifyingKey};

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Not a token of this issuer (another authenticator may know it).
    #[error("not a token of this issuer")]
    Foreign,
    #[error("{0}")]
    Invalid(String),
    #[error("this server has no --service-account-signing-key-file")]
    CannotSign,
}

/// The audiences a TokenRequest's or TokenReview's `spec` names, or
/// `default` (the server's) when it names none.
pub fn asked_audiences(spec: &Value, default: &[String]) -> Vec<String> {
    let asked: Vec<String> = spec["audiences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    match asked.is_empty() {
        true => default.to_vec(),
        false => asked,
    }
}

/// Who issues tokens, for whom, and with which keys.
pub struct Issuer {
    pub issuer: String,
    /// The audiences a token is for unless its request names others.
    pub audiences: Vec<String>,
    signing: Option<SigningKey>,
    verifying: Vec<VerifyingKey>,
}

impl Issuer {
    /// `signing_file` signs (and verifies); `key_files` only verify.
    pub fn load(
        issuer: &str,
        audiences: Vec<String>,
        signing_file: Option<&str>,
        key_files: &[String],
    ) -> Result<Issuer, KeyError> {
        let signing = signing_file.map(SigningKey::load).transpose()?;
        let mut verifying = Vec::new();
        for file in key_files {
            verifying.extend(keys::load_verifying(file)?);
        }
        Ok(Issuer {
            issuer: issuer.to_string(),
            audiences,
            signing,
            verifying,
        })
    }

    fn keys(&self) -> impl Iterator<Item = &VerifyingKey> {
        let signing = self.signing.iter().map(|s| &s.public);
        let mut seen = Vec::new();
        signing
            .chain(self.verifying.iter())
            .filter(move |k| match seen.contains(&k.kid) {
                true => false,
                false => {
                    seen.push(k.kid.clone());
                    true
                }
            })
    }

    pub fn sign(&self, claims: &Claims) -> Result<String, TokenError> {
        let signing = self.signing.as_ref().ok_or(TokenError::CannotSign)?;
        let mut header = Header::new(signing.algorithm);
        header.kid = Some(signing.kid.clone());
        jsonwebtoken::encode(&header, claims, &signing.key)
            .map_err(|e| TokenError::Invalid(e.to_string()))
    }

    /// The claims of `token` if this issuer signed it, it is for one of
    /// `audiences`, and it is within its validity (a minute of leeway,
    /// as kube-apiserver allows).
    pub fn verify(&self, token: &str, audiences: &[String]) -> Result<Claims, TokenError> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| TokenError::Foreign)?;
        if self.unverified_issuer(token).as_deref() != Some(self.issuer.as_str()) {
            return Err(TokenError::Foreign);
        }
        let mut candidates: Vec<&VerifyingKey> = self
            .keys()
            .filter(|k| k.algorithm == header.alg)
            .filter(|k| header.kid.as_ref().is_none_or(|kid| *kid == k.kid))
            .collect();
        if candidates.is_empty() {
            candidates = self.keys().filter(|k| k.algorithm == header.alg).collect();
        }
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(audiences);
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let mut why = "no key of this server verifies its signature".to_string();
        for key in candidates {
            match jsonwebtoken::decode::<Claims>(token, &key.key, &validation) {
                Ok(data) => return Ok(data.claims),
                Err(e) => why = describe(&e),
            }
        }
        Err(TokenError::Invalid(why))
    }

    /// The `iss` of a token, read without checking it.
    fn unverified_issuer(&self, token: &str) -> Option<String> {
        use base64::Engine;
        let payload = token.split('.').nth(1)?;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .ok()?;
        let claims: Value = serde_json::from_slice(&bytes).ok()?;
        claims["iss"].as_str().map(str::to_string)
    }

    /// `/.well-known/openid-configuration`.
    pub fn discovery(&self) -> Value {
        let algorithms: Vec<String> = self.keys().map(|k| format!("{:?}", k.algorithm)).collect();
        json!({
            "issuer": self.issuer,
            "jwks_uri": format!("{}/openid/v1/jwks", self.issuer.trim_end_matches('/')),
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": algorithms,
        })
    }

    /// `/openid/v1/jwks`.
    pub fn jwks(&self) -> Value {
        let keys: Vec<&Value> = self.keys().map(|k| &k.jwk).collect();
        json!({ "keys": keys })
    }
}

fn describe(err: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match err.kind() {
        ErrorKind::ExpiredSignature => "token has expired".into(),
        ErrorKind::ImmatureSignature => "token is not valid yet".into(),
        ErrorKind::InvalidAudience => "token audiences is invalid".into(),
        ErrorKind::InvalidSignature => "invalid signature".into(),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issuer(dir: &std::path::Path) -> Issuer {
        let pki = crate::pki::Pki::at(dir);
        pki.ensure(&["127.0.0.1".into()]).unwrap();
        let key = pki.service_account_key();
        Issuer::load("https://issuer.test", vec!["api".into()], key.to_str(), &[]).unwrap()
    }

    fn claims(issued: i64, seconds: i64) -> Claims {
        let account = ObjectRef {
            name: "robot".into(),
            uid: "u1".into(),
        };
        Claims::new(
            "https://issuer.test",
            "ns",
            account,
            vec!["api".into()],
            issued,
            seconds,
            None,
        )
    }

    #[test]
    fn a_signed_token_verifies_for_its_audience_until_it_expires() {
        let dir = tempfile::tempdir().unwrap();
        let issuer = issuer(dir.path());
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let token = issuer.sign(&claims(now, 600)).unwrap();
        let verified = issuer.verify(&token, &["api".into()]).unwrap();
        assert_eq!(verified.sub, "system:serviceaccount:ns:robot");
        let wrong = issuer.verify(&token, &["other".into()]);
        assert!(matches!(wrong, Err(TokenError::Invalid(ref m)) if m.contains("audience")));
        let old = issuer.sign(&claims(now - 7200, 600)).unwrap();
        let expired = issuer.verify(&old, &["api".into()]);
        assert!(matches!(expired, Err(TokenError::Invalid(ref m)) if m.contains("expired")));
        assert!(matches!(
            issuer.verify("abc", &[]),
            Err(TokenError::Foreign)
        ));
        let jwks = issuer.jwks();
        assert_eq!(jwks["keys"][0]["kty"], "EC");
        assert_eq!(issuer.discovery()["issuer"], "https://issuer.test");
    }

    #[test]
    fn another_key_of_the_same_issuer_is_refused() {
        let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let token = issuer(one.path()).sign(&claims(now, 600)).unwrap();
        let refused = issuer(two.path()).verify(&token, &["api".into()]);
        assert!(
            matches!(refused, Err(TokenError::Invalid(_))),
            "{refused:?}"
        );
    }

    #[test]
    fn the_audiences_asked_or_the_servers() {
        let default = vec!["api".to_string()];
        let asked = json!({"audiences": ["vault", 7, "db"]});
        assert_eq!(asked_audiences(&asked, &default), ["vault", "db"]);
        assert_eq!(
            asked_audiences(&json!({"audiences": []}), &default),
            ["api"]
        );
        assert_eq!(asked_audiences(&json!({}), &default), ["api"]);
    }
}
