//! The keys of service-account tokens: the one that signs (ES256 or
//! RS256, from a PKCS#8 PEM) and the ones that verify (public keys or the
//! public halves of private keys, from PEM files), each with its JWK for
//! the issuer's `/openid/v1/jwks`.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey};
use serde_json::{json, Value};
use x509_parser::prelude::FromDer;
use x509_parser::public_key::PublicKey;
use x509_parser::x509::SubjectPublicKeyInfo;

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{path}: {reason}")]
    File { path: String, reason: String },
}

/// A key that verifies tokens, and how the JWKS document shows it.
pub struct VerifyingKey {
    pub kid: String,
    pub algorithm: Algorithm,
    pub key: DecodingKey,
    pub jwk: Value,
}

/// The key that signs tokens.
pub struct SigningKey {
    pub kid: String,
    pub algorithm: Algorithm,
    pub key: EncodingKey,
    /// Its public half, which verifies what it signs.
    pub public: VerifyingKey,
}

impl SigningKey {
    pub fn load(path: &str) -> Result<SigningKey, KeyError> {
        let bad = |reason: String| KeyError::File {
            path: path.to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let pair = rcgen::KeyPair::from_pem(&text).map_err(|e| bad(e.to_string()))?;
        let public = verifying_key(&pair.public_key_der()).map_err(bad)?;
        let key = match public.algorithm {
            Algorithm::ES256 => EncodingKey::from_ec_pem(text.as_bytes()),
            _ => EncodingKey::from_rsa_pem(text.as_bytes()),
        }
        .map_err(|e| bad(e.to_string()))?;
        Ok(SigningKey {
            kid: public.kid.clone(),
            algorithm: public.algorithm,
            key,
            public,
        })
    }
}

/// Every key in a PEM file: public keys as they are, private keys by
/// their public halves.
pub fn load_verifying(path: &str) -> Result<Vec<VerifyingKey>, KeyError> {
    let bad = |reason: String| KeyError::File {
        path: path.to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let blocks = pem::parse_many(&text).map_err(|e| bad(e.to_string()))?;
    let mut keys = Vec::new();
    for block in blocks {
        let spki = match block.tag() {
            "PUBLIC KEY" => block.contents().to_vec(),
            "PRIVATE KEY" | "EC PRIVATE KEY" | "RSA PRIVATE KEY" => {
                let one = pem::encode(&block);
                let pair = rcgen::KeyPair::from_pem(&one).map_err(|e| bad(e.to_string()))?;
                pair.public_key_der()
            }
            _ => continue,
        };
        keys.push(verifying_key(&spki).map_err(bad)?);
    }
    if keys.is_empty() {
        return Err(bad("no public or private key in the file".into()));
    }
    Ok(keys)
}

/// The verifying key of a SubjectPublicKeyInfo (DER). Its kid is the
/// URL-safe base64 of the SHA-256 of that DER, as kube-apiserver names
/// its keys.
fn verifying_key(spki: &[u8]) -> Result<VerifyingKey, String> {
    let digest = ring::digest::digest(&ring::digest::SHA256, spki);
    let kid = URL_SAFE_NO_PAD.encode(digest.as_ref());
    let (_, info) = SubjectPublicKeyInfo::from_der(spki).map_err(|e| e.to_string())?;
    match info.parsed().map_err(|e| e.to_string())? {
        PublicKey::EC(point) if point.data().len() == 65 => {
            let (x, y) = point.data()[1..].split_at(32);
            let (x, y) = (URL_SAFE_NO_PAD.encode(x), URL_SAFE_NO_PAD.encode(y));
            let key = DecodingKey::from_ec_components(&x, &y).map_err(|e| e.to_string())?;
            let jwk = json!({"use": "sig", "kty": "EC", "kid": kid, "crv": "P-256",
                             "alg": "ES256", "x": x, "y": y});
            Ok(VerifyingKey {
                kid,
                algorithm: Algorithm::ES256,
                key,
                jwk,
            })
        }
        PublicKey::RSA(rsa) => {
            let n = URL_SAFE_NO_PAD.encode(trim_zeros(rsa.modulus));
            let e = URL_SAFE_NO_PAD.encode(trim_zeros(rsa.exponent));
            let key = DecodingKey::from_rsa_components(&n, &e).map_err(|e| e.to_string())?;
            let jwk =
                json!({"use": "sig", "kty": "RSA", "kid": kid, "alg": "RS256", "n": n, "e": e});
            Ok(VerifyingKey {
                kid,
                algorithm: Algorithm::RS256,
                key,
                jwk,
            })
        }
        _ => Err("only P-256 ECDSA and RSA keys sign service-account tokens".into()),
    }
}

/// A DER integer without its sign byte, as JWK wants it.
fn trim_zeros(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
    &bytes[start..]
}
