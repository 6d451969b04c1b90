//! Encryption at rest (`--encryption-provider-config`): kube-apiserver's
//! value transformers, applied by the etcd storage to every value it
//! writes and reads, so nothing above `storage/` sees ciphertext.
//! config.rs reads the EncryptionConfiguration, providers.rs holds the
//! ciphers, transformer.rs one resource's providers and kube's value
//! prefixes, resources.rs which resource (by etcd key) uses which.

mod config;
mod providers;
mod resources;
mod transformer;

use std::path::Path;

pub use resources::{Encryption, Pattern, Rule};
pub use transformer::{TransformError, Transformer};

/// Why an EncryptionConfiguration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EncryptionError {
    #[error("cannot read it: {0}")]
    Read(#[from] std::io::Error),
    #[error("not an EncryptionConfiguration: {0}")]
    Parse(String),
    #[error("{0}")]
    Invalid(String),
}

/// The rules of the configuration file at `path`.
pub fn load(path: &Path) -> Result<Vec<Rule>, EncryptionError> {
    let text = std::fs::read_to_string(path)?;
    if text.trim().is_empty() {
        return Err(EncryptionError::Invalid("the file is empty".into()));
    }
    config::parse(&text)
}
