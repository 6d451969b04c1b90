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

pub use config::{load, EncryptionError};
pub use resources::{Encryption, Pattern, Rule};
pub use transformer::{TransformError, Transformer};
