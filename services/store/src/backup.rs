//! Backups: `etcdctl snapshot save` downloads the member's MVCC space
//! (revisions, leases, members) followed by a SHA-256, as etcd appends one
//! to its database; `--restore-snapshot` starts the members of a new
//! cluster from such a file instead of from nothing. Revisions and leases
//! survive; the membership is the new cluster's.

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::{Result, StoreError};
use crate::mvcc::MvccStore;

const DIGEST_LEN: usize = 32;
/// etcdctl only accepts a download whose length before the digest is a
/// multiple of 512 (a bbolt file is made of pages); the dump is padded.
const ALIGN: usize = 512;
const MAGIC: &[u8; 8] = b"capstan1";
const HEADER_LEN: usize = 16;

/// A backup's bytes: a header naming the format and the dump's length,
/// the dump, zero padding, then the SHA-256 of all that.
pub fn seal(dump: Vec<u8>) -> Vec<u8> {
    let mut sealed = Vec::with_capacity(dump.len() + HEADER_LEN + ALIGN + DIGEST_LEN);
    sealed.extend_from_slice(MAGIC);
    sealed.extend_from_slice(&(dump.len() as u64).to_be_bytes());
    sealed.extend_from_slice(&dump);
    sealed.resize(sealed.len().div_ceil(ALIGN) * ALIGN, 0);
    let digest = Sha256::digest(&sealed);
    sealed.extend_from_slice(&digest);
    sealed
}

/// The dump inside a backup, after checking its digest and header.
pub fn unseal(sealed: &[u8]) -> std::result::Result<&[u8], String> {
    if sealed.len() < HEADER_LEN + DIGEST_LEN {
        return Err("too short to be a snapshot".into());
    }
    let (body, digest) = sealed.split_at(sealed.len() - DIGEST_LEN);
    if Sha256::digest(body).as_slice() != digest {
        return Err("its SHA-256 does not match its contents (truncated or corrupted)".into());
    }
    if &body[..8] != MAGIC {
        return Err("not a capstan snapshot (an etcd database cannot be restored here)".into());
    }
    let length = u64::from_be_bytes(body[8..HEADER_LEN].try_into().expect("8 bytes")) as usize;
    body.get(HEADER_LEN..HEADER_LEN + length)
        .ok_or_else(|| "its recorded length exceeds the file".to_string())
}

/// Loads the backup at `path` into `mvcc`, leaving out the old members.
pub fn restore(path: &Path, mvcc: &MvccStore) -> Result<()> {
    let bad = |why: String| StoreError::Config(format!("snapshot {}: {why}", path.display()));
    let sealed = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    let dump = unseal(&sealed).map_err(bad)?;
    mvcc.restore(dump)
        .map_err(|e| bad(format!("does not decode: {e}")))?;
    crate::apply::members::clear_members(&**mvcc.backend())?;
    tracing::info!(
        snapshot = %path.display(),
        revision = mvcc.current_revision(),
        "restored from a snapshot"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_dump_unseals_and_any_change_is_caught() {
        let sealed = seal(b"revisions".to_vec());
        assert_eq!((sealed.len() - DIGEST_LEN) % ALIGN, 0);
        assert_eq!(unseal(&sealed).unwrap(), b"revisions");
        let mut flipped = sealed.clone();
        flipped[0] ^= 1;
        assert!(unseal(&flipped).is_err());
        assert!(unseal(&sealed[..sealed.len() - 1]).is_err());
        assert!(unseal(b"short").is_err());
    }
}
