//! Secrets encrypted at rest by default: on first start `capstan` writes
//! `<data-dir>/pki/encryption-config.yaml`, kube's EncryptionConfiguration
//! with a generated 32-byte secretbox key for `secrets` and identity after
//! it (so Secrets written before encryption still read), readable by its
//! owner only; later starts reuse it. `--encryption-provider-config`
//! replaces it. `capstan certificates` writes the same file for a control
//! plane of several processes, which all read it.
//!
//! kube's documentation advises against aescbc (a padding oracle), which
//! older builds wrote. A file exactly as an older build wrote it is
//! rotated the way kube's documentation rotates a key, in one step since
//! one process serves: a new secretbox key first (it writes), the aescbc
//! key after it (Secrets written with it still read), identity last.
//! Rewriting the Secrets (`kubectl get secrets -A -o json | kubectl
//! replace -f -`) moves them to secretbox, after which the aescbc key may
//! be removed. A file in any other form is the user's and left alone.

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use capstan_apiserver::pki::files;
use rand::RngCore;

const FILE: &str = "encryption-config.yaml";

const HEADER: &str = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n\
resources:\n- resources:\n  - secrets\n  providers:\n";

/// One provider's entry with one key, as the generated files hold it.
fn provider(name: &str, secret: &str) -> String {
    format!("  - {name}:\n      keys:\n      - name: key1\n        secret: {secret}\n")
}

const IDENTITY: &str = "  - identity: {}\n";

/// The file under `pki_dir`, made if it is not there and moved from aescbc
/// to secretbox if an older build made it; its path.
pub fn ensure(pki_dir: &Path) -> std::io::Result<PathBuf> {
    let path = pki_dir.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => match older_aescbc_key(&text) {
            Some(aescbc) => format!(
                "{HEADER}{}{}{IDENTITY}",
                provider("secretbox", &new_key()),
                provider("aescbc", aescbc)
            ),
            None => return Ok(path),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            format!("{HEADER}{}{IDENTITY}", provider("secretbox", &new_key()))
        }
        Err(e) => return Err(e),
    };
    files::private_dir(pki_dir)?;
    files::write_private(&path, text.as_bytes())?;
    Ok(path)
}

/// 32 random bytes, base64: a secretbox key.
fn new_key() -> String {
    let mut key = [0u8; 32];
    rand::rng().fill_bytes(&mut key);
    STANDARD.encode(key)
}

/// The aescbc key of a file exactly as an older build wrote it.
fn older_aescbc_key(text: &str) -> Option<&str> {
    let line = text.lines().find(|l| l.starts_with("        secret: "))?;
    let key = line.trim_start().strip_prefix("secret: ")?;
    let older = format!("{HEADER}{}{IDENTITY}", provider("aescbc", key));
    (text == older).then_some(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn made_once_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = ensure(dir.path()).unwrap();
        let first = std::fs::read_to_string(&path).unwrap();
        assert!(
            first.contains("- secrets") && first.contains("  - secretbox:"),
            "{first}"
        );
        assert!(!first.contains("aescbc"), "{first}");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(ensure(dir.path()).unwrap(), path);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), first);
        let other = tempfile::tempdir().unwrap();
        let second = std::fs::read_to_string(ensure(other.path()).unwrap()).unwrap();
        assert_ne!(first, second, "each cluster gets its own key");
    }

    #[test]
    fn an_older_aescbc_file_gets_a_secretbox_key_first_and_keeps_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let older = format!(
            "{HEADER}{}{IDENTITY}",
            provider("aescbc", "MTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTE=")
        );
        let path = dir.path().join(FILE);
        std::fs::write(&path, &older).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        ensure(dir.path()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let secretbox = text.find("secretbox").unwrap();
        let aescbc = text.find("aescbc").unwrap();
        assert!(secretbox < aescbc && text.ends_with(IDENTITY), "{text}");
        assert!(text.contains("MTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTE="));
        assert_eq!(mode(&path), 0o600);
        let rules = capstan_apiserver::storage::encryption::load(&path).unwrap();
        assert_eq!(rules.len(), 1, "{text}");
        // Once moved, it is left alone; so is a file the user wrote.
        ensure(dir.path()).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        let mine = older.replace("  - identity: {}\n", "");
        std::fs::write(&path, &mine).unwrap();
        ensure(dir.path()).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), mine);
    }
}
