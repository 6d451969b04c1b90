//! The leave a dispatched request holds while it runs.

use tokio::time::Instant;

/// Permission to run, held while the request runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grant {
    pub(super) queue: Option<u32>,
    pub seats: u32,
    pub started: Instant,
}
