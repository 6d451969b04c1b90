//! Files that hold secrets (private keys, kubeconfigs with credentials,
//! encryption keys): written whole under another name and renamed into
//! place, so a crash never leaves half a key that a restart would take for
//! the key, and readable by their owner only (0600) whatever the umask, in
//! folders only their owner can enter (0700). A file or folder that is
//! already there (made by an older build, or copied with a looser mode)
//! is tightened, not left as it was.

use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// A private file's mode.
pub const PRIVATE_FILE: u32 = 0o600;
/// A private folder's mode.
pub const PRIVATE_DIR: u32 = 0o700;

/// Writes `text` to `path`, replacing it, readable by its owner only.
pub fn write_private(path: &Path, text: &[u8]) -> io::Result<()> {
    write_whole(path, text, PRIVATE_FILE)
}

/// Writes `text` to `path` whole, replacing it, with `mode`.
pub fn write_whole(path: &Path, text: &[u8], mode: u32) -> io::Result<()> {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = Path::new(&partial);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(partial)?;
    // A partial file left by a crash keeps the mode it was made with.
    file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    file.write_all(text)?;
    file.sync_all()?;
    std::fs::rename(partial, path)?;
    sync_parent(path)
}

/// Makes `dir` (and its parents) if missing; `dir` itself is made, or
/// tightened, to be entered by its owner only.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR)
        .create(dir)?;
    tighten(dir, PRIVATE_DIR)
}

/// Takes from `path` whatever `mode` does not allow (group and others'
/// bits); a regular file or folder only, never a device or a pipe such as
/// `/dev/stdout`.
pub fn tighten(path: &Path, mode: u32) -> io::Result<()> {
    let metadata = std::fs::metadata(path)?;
    let kind = metadata.file_type();
    let current = metadata.permissions().mode() & 0o777;
    if (kind.is_file() || kind.is_dir()) && current & !mode != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(current & mode))?;
    }
    Ok(())
}

fn sync_parent(path: &Path) -> io::Result<()> {
    match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) => std::fs::File::open(dir)?.sync_all(),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn private_files_replace_looser_ones_and_folders_tighten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(mode(&path), 0o600);
        let keys = dir.path().join("pki");
        std::fs::create_dir(&keys).unwrap();
        std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&keys.join("etcd")).unwrap();
        private_dir(&keys).unwrap();
        assert_eq!((mode(&keys), mode(&keys.join("etcd"))), (0o700, 0o700));
        let key = keys.join("a.key");
        std::fs::write(&key, "k").unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
        tighten(&key, PRIVATE_FILE).unwrap();
        assert_eq!(mode(&key), 0o600);
        tighten(Path::new("/dev/null"), PRIVATE_FILE).unwrap();
        assert_eq!(
            mode(Path::new("/dev/null")),
            0o666,
            "devices are left alone"
        );
    }
}
