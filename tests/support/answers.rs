//! How a fault run's client reads an error answer. Only what leaves the
//! outcome unknown is ambiguous: a timeout, a dropped or refused
//! connection, and the server saying it is unavailable (etcd's
//! `Unavailable`; kube's 503, 504 and 429 and its ServerTimeout). A
//! refusal the server is entitled to (a lease that expired, a full
//! database) means the request did not happen. Anything else, an
//! `Internal` or a 500, a 400 or 422 to a well-formed request, is a
//! failure of the run.

use std::sync::Mutex;

use tonic::Code;

use crate::history::Output;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The request may or may not have taken effect.
    Unknown,
    /// The server lawfully refused: it did not take effect.
    Refused,
    /// The server failed a request it should have served.
    Failure,
}

/// What a client records for an error answer: an unknown outcome, or
/// that the request did not happen; a failure is also noted in `errors`
/// (as `note` says it).
pub fn outcome(
    answer: Answer,
    errors: &Mutex<Vec<String>>,
    note: impl FnOnce() -> String,
) -> Output {
    match answer {
        Answer::Unknown => Output::Unknown,
        Answer::Refused => Output::Failed,
        Answer::Failure => {
            errors
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(note());
            Output::Failed
        }
    }
}

/// An etcd client's error.
pub fn etcd(err: &etcd_client::Error) -> Answer {
    use etcd_client::Error;
    match err {
        Error::GRpcStatus(status) => grpc(status.code(), status.message()),
        Error::TransportError(_) | Error::IoError(_) => Answer::Unknown,
        _ => Answer::Failure,
    }
}

fn grpc(code: Code, message: &str) -> Answer {
    match code {
        Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled => Answer::Unknown,
        // tonic reports a connection broken mid-call as Unknown ("transport
        // error") or, for an HTTP/2 reset, as Internal ("h2 protocol
        // error"): the client's own words, not the server's answer.
        Code::Unknown if message.contains("transport") => Answer::Unknown,
        Code::Internal if message.starts_with("h2 protocol error") => Answer::Unknown,
        // A lease that expired, or a database over its quota.
        Code::NotFound if message == "etcdserver: requested lease not found" => Answer::Refused,
        Code::ResourceExhausted if message.starts_with("etcdserver: ") => Answer::Refused,
        _ => Answer::Failure,
    }
}

/// A kube-rs client's error.
pub fn kube(err: &kube::Error) -> Answer {
    match err {
        kube::Error::Api(status) => match (status.code, status.reason.as_str()) {
            (503 | 504 | 429, _) | (500, "ServerTimeout") => Answer::Unknown,
            _ => Answer::Failure,
        },
        // No answer, or one cut off before its body was whole.
        _ => Answer::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_leaves_the_outcome_unknown_is_ambiguous() {
        assert_eq!(
            grpc(Code::Unavailable, "etcdserver: no leader"),
            Answer::Unknown
        );
        assert_eq!(grpc(Code::Unknown, "transport error"), Answer::Unknown);
        let reset = "h2 protocol error: stream error received: unexpected internal error";
        assert_eq!(grpc(Code::Internal, reset), Answer::Unknown);
        let lease = "etcdserver: requested lease not found";
        assert_eq!(grpc(Code::NotFound, lease), Answer::Refused);
        assert_eq!(
            grpc(Code::Internal, "etcdserver: storage error: x"),
            Answer::Failure
        );
        let bad = "etcdserver: key is not provided";
        assert_eq!(grpc(Code::InvalidArgument, bad), Answer::Failure);
    }
}
