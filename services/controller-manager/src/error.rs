//! The crate's one error enum. A reconcile returns it; the work queue
//! logs it and retries the key with backoff. Errors from kube-rs are kept
//! whole so callers can still read the API's `Status` (reason, code).

/// What went wrong while starting or running the controllers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the API failed (boxed: kube's error is large).
    #[error(transparent)]
    Kube(Box<kube::Error>),
    /// The client machinery failed (connection, health server).
    #[error(transparent)]
    Client(Box<capstan_client::Error>),
    /// A flag or setting that makes no sense.
    #[error(transparent)]
    Config(#[from] capstan_telemetry::settings::ConfigError),
    /// An object the controller cannot act on as it is (an invalid
    /// selector, a template it cannot use); retried like any error, in
    /// case the object is fixed.
    #[error("{0}")]
    Invalid(String),
    /// A reference to a type the controller does not know (yet): discovery
    /// may bring it later, so it is retried with backoff like any error.
    #[error("unknown type {0}: not (yet) served")]
    UnknownType(String),
    /// Several writes of one sync failed; the first is kept.
    #[error("{failed} of {attempted} writes failed; first: {first}")]
    Partial {
        /// How many were tried.
        attempted: usize,
        /// How many failed.
        failed: usize,
        /// The first failure.
        first: Box<Error>,
    },
}

impl From<kube::Error> for Error {
    fn from(error: kube::Error) -> Error {
        Error::Kube(Box::new(error))
    }
}

impl From<capstan_client::Error> for Error {
    fn from(error: capstan_client::Error) -> Error {
        Error::Client(Box::new(error))
    }
}

/// This crate's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The HTTP status code of an API refusal, if this is one.
    pub fn code(&self) -> Option<u16> {
        match self {
            Error::Kube(e) => match e.as_ref() {
                kube::Error::Api(status) => Some(status.code),
                _ => None,
            },
            Error::Partial { first, .. } => first.code(),
            _ => None,
        }
    }

    /// The API's message for a refusal, or the error's text.
    pub fn api_message(&self) -> String {
        match self {
            Error::Kube(e) => match e.as_ref() {
                kube::Error::Api(status) => status.message.clone(),
                other => other.to_string(),
            },
            Error::Partial { first, .. } => first.api_message(),
            other => other.to_string(),
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    pub fn is_conflict(&self) -> bool {
        self.code() == Some(409)
    }

    /// AlreadyExists is a 409 with that reason; Conflict is a 409 too.
    pub fn is_already_exists(&self) -> bool {
        match self {
            Error::Kube(e) => {
                matches!(e.as_ref(), kube::Error::Api(s) if s.reason == "AlreadyExists")
            }
            _ => false,
        }
    }

    /// A namespace being deleted refuses new objects in it (403 with
    /// reason Forbidden and kube's "being terminated" cause); creating
    /// there is pointless, not an error worth an event.
    pub fn is_namespace_terminating(&self) -> bool {
        self.code() == Some(403) && self.api_message().contains("being terminated")
    }
}
