//! The crate's one error type. Errors from kube-rs are kept whole (so a
//! caller can still match `kube::Error::Api` and read the API's `Status`);
//! the rest say what could not be set up.

use std::path::PathBuf;

/// What went wrong in the client machinery.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The kubeconfig file could not be read or understood.
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file named by `--kubeconfig`.
        path: PathBuf,
        /// kube-rs's reason.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// Inline connection parts (server URL, CA, client certificate and
    /// key) that do not make a configuration.
    #[error("connection settings: {0}")]
    Settings(String),
    /// A request to the API failed, or a client could not be built
    /// (boxed: kube's error is large).
    #[error(transparent)]
    Kube(Box<kube::Error>),
    /// The health and metrics server could not listen.
    #[error("serve health and metrics on {address}: {source}")]
    Serve {
        /// The address it was asked to listen on.
        address: String,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
}

impl From<kube::Error> for Error {
    fn from(error: kube::Error) -> Error {
        Error::Kube(Box::new(error))
    }
}

/// This crate's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;
