//! The crate's one error type; API errors keep kube-rs's error whole (so
//! the API's `Status` can still be read) with what was being done.

/// What stopped the process or one of its requests.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Client(Box<capstan_client::Error>),
    #[error("{action}: {source}")]
    Api {
        action: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("TLS: {0}")]
    Tls(String),
    #[error("{what}: the API did not answer within {within:?}")]
    Unanswered {
        what: &'static str,
        within: std::time::Duration,
    },
    #[error("serve {what} on {address}: {source}")]
    Serve {
        what: &'static str,
        address: String,
        #[source]
        source: std::io::Error,
    },
}

impl From<capstan_client::Error> for Error {
    fn from(error: capstan_client::Error) -> Error {
        Error::Client(Box::new(error))
    }
}

impl Error {
    /// An API error with what was being attempted.
    pub fn api(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
        let action = action.into();
        move |source| Error::Api {
            action,
            source: Box::new(source),
        }
    }
}

/// The HTTP status code of an API error, if the API answered.
pub fn api_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}
