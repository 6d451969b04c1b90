//! Why the server did not start.

use crate::error::ApiError;
use crate::storage::StorageError;

/// What stopped the start, named by the flag or the step it came from.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("store: {0}")]
    Store(#[from] StorageError),
    #[error("bootstrap: {0}")]
    Bootstrap(#[from] ApiError),
    #[error("authentication: {0}")]
    TokenFile(#[from] crate::routes::chain::token_file::TokenFileError),
    #[error("http: {0}")]
    Http(#[from] std::io::Error),
    #[error("{0}")]
    Tls(#[from] crate::serving::tls::TlsError),
    #[error("--client-ca-file: {0:?}")]
    ClientCa(webpki::Error),
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("--admission-control-config-file {0}")]
    AdmissionConfig(#[from] crate::admission::config_file::AdmissionConfigError),
    #[error("service-account keys: {0}")]
    Keys(#[from] crate::serviceaccount::keys::KeyError),
    #[error("audit: {0}")]
    Audit(#[from] crate::audit::AuditError),
    #[error("--encryption-provider-config {file}: {error}")]
    Encryption {
        file: String,
        error: crate::storage::encryption::EncryptionError,
    },
}
