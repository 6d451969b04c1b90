//! Reading the PEM files the TLS flags name, with errors that name the
//! flag and the file.

use std::path::Path;

use crate::error::{Result, StoreError};

/// The bytes of the PEM file `path`, given as `--{flag}`.
pub fn read(flag: &str, path: &str) -> Result<Vec<u8>> {
    let bytes = std::fs::read(Path::new(path))
        .map_err(|err| StoreError::Config(format!("--{flag} {path}: {err}")))?;
    if !String::from_utf8_lossy(&bytes).contains("-----BEGIN") {
        return Err(StoreError::Config(format!(
            "--{flag} {path}: not a PEM file"
        )));
    }
    Ok(bytes)
}
