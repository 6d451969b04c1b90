//! The ciphers of kube-apiserver's providers, value for value the same
//! bytes it writes (after the `k8s:enc:<provider>:v1:<key>:` prefix):
//! - aescbc: a random 16-byte IV, then AES-CBC with PKCS#7 padding;
//! - aesgcm: a random 12-byte nonce, then the AES-GCM seal (ciphertext and
//!   tag), the etcd key as authenticated data so a value cannot be moved
//!   to another key;
//! - secretbox: a random 24-byte nonce, then NaCl's secretbox (XSalsa20 and
//!   Poly1305, the tag first).
//!
//! AES keys are 16, 24 or 32 bytes (AES-128/192/256), secretbox keys 32.

use aes::{Aes128, Aes192, Aes256};
use aes_gcm::aead::consts::U12;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::AesGcm;
use cbc::cipher::block_padding::Pkcs7;
use cbc::cipher::{BlockCipher, BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use crypto_secretbox::XSalsa20Poly1305;
use rand::RngCore;

const CBC_IV: usize = 16;
const GCM_NONCE: usize = 12;
const SECRETBOX_NONCE: usize = 24;
/// Poly1305's and GCM's tag.
const TAG: usize = 16;

/// One named key of a provider.
pub struct Key {
    pub name: String,
    pub cipher: Cipher,
}

/// A provider's cipher with its key (the raw bytes: each seal builds the
/// key schedule, which costs far less than the store round trip).
pub enum Cipher {
    AesCbc(Vec<u8>),
    AesGcm(Vec<u8>),
    Secretbox(Vec<u8>),
}

/// Why a stored value does not open; the key's name is added by the
/// caller, which knows it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CipherError {
    #[error("the stored data is shorter than the required size")]
    Short,
    #[error("the stored data is not a multiple of the block size, or its padding is invalid")]
    Padding,
    #[error("the stored data does not authenticate (a wrong key, or tampered data)")]
    Authentication,
}

impl Cipher {
    /// The cipher `provider` (`aescbc`, `aesgcm`, `secretbox`) with `key`.
    pub fn new(provider: &str, key: &[u8]) -> Result<Cipher, String> {
        let aes_size = matches!(key.len(), 16 | 24 | 32);
        match provider {
            "aescbc" | "aesgcm" if !aes_size => Err(format!(
                "{provider} keys are 16, 24 or 32 bytes, this one is {}",
                key.len()
            )),
            "aescbc" => Ok(Cipher::AesCbc(key.to_vec())),
            "aesgcm" => Ok(Cipher::AesGcm(key.to_vec())),
            "secretbox" if key.len() != 32 => Err(format!(
                "secretbox keys are 32 bytes, this one is {}",
                key.len()
            )),
            "secretbox" => Ok(Cipher::Secretbox(key.to_vec())),
            other => Err(format!("unknown provider {other}")),
        }
    }

    /// `plain` encrypted, after a fresh random IV or nonce; `context` is
    /// the etcd key, authenticated by aesgcm.
    pub fn seal(&self, plain: &[u8], context: &[u8]) -> Vec<u8> {
        match self {
            Cipher::AesCbc(key) => cbc_seal(key, plain),
            Cipher::AesGcm(key) => gcm_seal(key, plain, context),
            Cipher::Secretbox(key) => secretbox_seal(key, plain),
        }
    }

    /// What `seal` sealed, if this key sealed it at `context`.
    pub fn open(&self, sealed: &[u8], context: &[u8]) -> Result<Vec<u8>, CipherError> {
        match self {
            Cipher::AesCbc(key) => cbc_open(key, sealed),
            Cipher::AesGcm(key) => gcm_open(key, sealed, context),
            Cipher::Secretbox(key) => secretbox_open(key, sealed),
        }
    }
}

fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    rand::rng().fill_bytes(&mut bytes);
    bytes
}

fn cbc_seal(key: &[u8], plain: &[u8]) -> Vec<u8> {
    fn seal<C: BlockEncryptMut + BlockCipher + aes::cipher::KeyInit>(
        key: &[u8],
        iv: &[u8],
        plain: &[u8],
    ) -> Vec<u8> {
        let encryptor = cbc::Encryptor::<C>::new_from_slices(key, iv).expect("checked key size");
        encryptor.encrypt_padded_vec_mut::<Pkcs7>(plain)
    }
    let iv = random::<CBC_IV>();
    let sealed = match key.len() {
        16 => seal::<Aes128>(key, &iv, plain),
        24 => seal::<Aes192>(key, &iv, plain),
        _ => seal::<Aes256>(key, &iv, plain),
    };
    [iv.as_slice(), &sealed].concat()
}

fn cbc_open(key: &[u8], sealed: &[u8]) -> Result<Vec<u8>, CipherError> {
    fn open<C: BlockDecryptMut + BlockCipher + aes::cipher::KeyInit>(
        key: &[u8],
        iv: &[u8],
        data: &[u8],
    ) -> Result<Vec<u8>, CipherError> {
        let decryptor = cbc::Decryptor::<C>::new_from_slices(key, iv).expect("checked key size");
        decryptor
            .decrypt_padded_vec_mut::<Pkcs7>(data)
            .map_err(|_| CipherError::Padding)
    }
    if sealed.len() < CBC_IV {
        return Err(CipherError::Short);
    }
    let (iv, data) = sealed.split_at(CBC_IV);
    match key.len() {
        16 => open::<Aes128>(key, iv, data),
        24 => open::<Aes192>(key, iv, data),
        _ => open::<Aes256>(key, iv, data),
    }
}

fn gcm_seal(key: &[u8], plain: &[u8], aad: &[u8]) -> Vec<u8> {
    fn seal<C: Aead + KeyInit>(key: &[u8], nonce: &[u8], plain: &[u8], aad: &[u8]) -> Vec<u8> {
        let cipher = C::new_from_slice(key).expect("checked key size");
        let payload = Payload { msg: plain, aad };
        cipher
            .encrypt(nonce.into(), payload)
            .expect("AES-GCM seals any value under 64 GB")
    }
    let nonce = random::<GCM_NONCE>();
    let sealed = match key.len() {
        16 => seal::<AesGcm<Aes128, U12>>(key, &nonce, plain, aad),
        24 => seal::<AesGcm<Aes192, U12>>(key, &nonce, plain, aad),
        _ => seal::<AesGcm<Aes256, U12>>(key, &nonce, plain, aad),
    };
    [nonce.as_slice(), &sealed].concat()
}

fn gcm_open(key: &[u8], sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>, CipherError> {
    fn open<C: Aead + KeyInit>(
        key: &[u8],
        nonce: &[u8],
        data: &[u8],
        aad: &[u8],
    ) -> Result<Vec<u8>, CipherError> {
        let cipher = C::new_from_slice(key).expect("checked key size");
        let payload = Payload { msg: data, aad };
        cipher
            .decrypt(nonce.into(), payload)
            .map_err(|_| CipherError::Authentication)
    }
    if sealed.len() < GCM_NONCE + TAG {
        return Err(CipherError::Short);
    }
    let (nonce, data) = sealed.split_at(GCM_NONCE);
    match key.len() {
        16 => open::<AesGcm<Aes128, U12>>(key, nonce, data, aad),
        24 => open::<AesGcm<Aes192, U12>>(key, nonce, data, aad),
        _ => open::<AesGcm<Aes256, U12>>(key, nonce, data, aad),
    }
}

fn secretbox_seal(key: &[u8], plain: &[u8]) -> Vec<u8> {
    let cipher = XSalsa20Poly1305::new_from_slice(key).expect("checked key size");
    let nonce = random::<SECRETBOX_NONCE>();
    let sealed = cipher
        .encrypt((&nonce).into(), plain)
        .expect("secretbox seals any value");
    [nonce.as_slice(), &sealed].concat()
}

fn secretbox_open(key: &[u8], sealed: &[u8]) -> Result<Vec<u8>, CipherError> {
    if sealed.len() < SECRETBOX_NONCE + TAG {
        return Err(CipherError::Short);
    }
    let cipher = XSalsa20Poly1305::new_from_slice(key).expect("checked key size");
    let (nonce, data) = sealed.split_at(SECRETBOX_NONCE);
    cipher
        .decrypt(nonce.into(), data)
        .map_err(|_| CipherError::Authentication)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: &[u8] = br#"{"kind":"Secret","data":{"a":"Yg=="}}"#;
    const AT: &[u8] = b"/registry/secrets/default/s1";

    fn ciphers() -> Vec<Cipher> {
        let mut all = Vec::new();
        for size in [16, 24, 32] {
            all.push(Cipher::new("aescbc", &vec![7; size]).unwrap());
            all.push(Cipher::new("aesgcm", &vec![7; size]).unwrap());
        }
        all.push(Cipher::new("secretbox", &[7; 32]).unwrap());
        all
    }

    #[test]
    fn round_trip_with_fresh_randomness() {
        for cipher in ciphers() {
            let sealed = cipher.seal(PLAIN, AT);
            assert_ne!(&sealed[..], PLAIN);
            assert_ne!(
                sealed,
                cipher.seal(PLAIN, AT),
                "a fresh IV or nonce each time"
            );
            assert_eq!(cipher.open(&sealed, AT).unwrap(), PLAIN);
            assert_eq!(cipher.open(&cipher.seal(b"", AT), AT).unwrap(), b"");
        }
    }

    #[test]
    fn wrong_key_does_not_open() {
        for (cipher, other) in ciphers().into_iter().zip(wrong_keys()) {
            let sealed = cipher.seal(PLAIN, AT);
            // CBC has no tag: a wrong key shows as bad padding or as
            // garbage, never as the plain text.
            assert_ne!(other.open(&sealed, AT).ok().as_deref(), Some(PLAIN));
        }
    }

    fn wrong_keys() -> Vec<Cipher> {
        let mut all = Vec::new();
        for size in [16, 24, 32] {
            all.push(Cipher::new("aescbc", &vec![8; size]).unwrap());
            all.push(Cipher::new("aesgcm", &vec![8; size]).unwrap());
        }
        all.push(Cipher::new("secretbox", &[8; 32]).unwrap());
        all
    }

    #[test]
    fn tampered_or_moved_values_are_refused() {
        for cipher in ciphers() {
            let mut sealed = cipher.seal(PLAIN, AT);
            let last = sealed.len() - 1;
            sealed[last] ^= 1;
            assert_ne!(cipher.open(&sealed, AT).ok().as_deref(), Some(PLAIN));
            assert!(cipher.open(&sealed[..3], AT).is_err());
        }
        let gcm = Cipher::new("aesgcm", &[7; 32]).unwrap();
        let sealed = gcm.seal(PLAIN, AT);
        let moved = gcm.open(&sealed, b"/registry/secrets/default/s2");
        assert_eq!(moved, Err(CipherError::Authentication));
    }

    #[test]
    fn key_sizes_are_checked() {
        assert!(Cipher::new("aescbc", &[0; 31]).is_err());
        assert!(Cipher::new("aesgcm", &[0; 8]).is_err());
        assert!(Cipher::new("secretbox", &[0; 16]).is_err());
        assert!(Cipher::new("aesxyz", &[0; 32]).is_err());
    }
}
