//! Secrets encrypted at rest by default: on first start `capstan` writes
//! `<data-dir>/pki/encryption-config.yaml`, kube's EncryptionConfiguration
//! with a generated 32-byte aescbc key for `secrets` and identity after
//! it (so Secrets written before still read), readable by its owner
//! only; later starts reuse it. `--encryption-provider-config` replaces it.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rand::RngCore;

/// The file under `pki_dir`, made if it is not there; its path.
pub fn ensure(pki_dir: &Path) -> std::io::Result<PathBuf> {
    let path = pki_dir.join("encryption-config.yaml");
    if path.exists() {
        return Ok(path);
    }
    let mut key = [0u8; 32];
    rand::rng().fill_bytes(&mut key);
    let text = format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n\
         - resources:\n  - secrets\n  providers:\n  - aescbc:\n      keys:\n      - name: key1\n        \
         secret: {}\n  - identity: {{}}\n",
        STANDARD.encode(key)
    );
    // Written whole under another name, then renamed: a crash never
    // leaves a half-written key that a restart would take as the key.
    let partial = pki_dir.join("encryption-config.yaml.partial");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&partial)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&partial, &path)?;
    std::fs::File::open(pki_dir)?.sync_all()?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn made_once_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = ensure(dir.path()).unwrap();
        let first = std::fs::read_to_string(&path).unwrap();
        assert!(
            first.contains("- secrets") && first.contains("aescbc"),
            "{first}"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(ensure(dir.path()).unwrap(), path);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), first);
        let other = tempfile::tempdir().unwrap();
        let second = std::fs::read_to_string(ensure(other.path()).unwrap()).unwrap();
        assert_ne!(first, second, "each cluster gets its own key");
    }
}
