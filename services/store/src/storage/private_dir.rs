//! The member's folders, made as etcd makes them: readable by their owner
//! only (0700), for they hold every key and value in the clear. A folder
//! that already exists is used as it is, as etcd 3.4 does, with a warning
//! when others may read it.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

use crate::error::{Result, StoreError};

const PRIVATE: u32 = 0o700;

/// Creates `dir` (and missing parents) 0700, or warns if it exists and
/// its group or others have any access.
pub fn ensure_private_dir(dir: &Path) -> Result<()> {
    let failed = |err: std::io::Error| StoreError::Storage(format!("{}: {err}", dir.display()));
    match std::fs::metadata(dir) {
        Ok(found) if !found.is_dir() => Err(StoreError::Storage(format!(
            "{}: not a directory",
            dir.display()
        ))),
        Ok(found) => {
            let mode = found.permissions().mode() & 0o777;
            if mode & !PRIVATE != 0 {
                tracing::warn!(
                    "directory {} has mode {mode:04o}: others may read the data in it; \
                     {PRIVATE:04o} keeps it to its owner",
                    dir.display()
                );
            }
            Ok(())
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(PRIVATE)
            .create(dir)
            .map_err(failed),
        Err(err) => Err(failed(err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_folder_and_its_new_parents_are_private() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        ensure_private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), PRIVATE);
        assert_eq!(mode(&root.path().join("a")), PRIVATE);
        ensure_private_dir(&dir).unwrap();
    }

    #[test]
    fn an_open_folder_is_used_as_it_is_and_a_file_is_refused() {
        let root = tempfile::tempdir().unwrap();
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(root.path()).unwrap();
        assert_eq!(mode(root.path()), 0o755);
        let file = root.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(ensure_private_dir(&file).is_err());
    }
}
