//! The pause before dialing a peer again: 50 ms, doubling to at most 1 s,
//! back to the start once a connection held. Shared by the gRPC links
//! (`grpc.rs`) and the direct links (`links/`).

use std::time::Duration;

const FIRST: Duration = Duration::from_millis(50);
const MOST: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { next: FIRST }
    }
}

impl Backoff {
    /// The pause to take now; the next one is twice as long, up to 1 s.
    pub fn pause(&mut self) -> Duration {
        let pause = self.next;
        self.next = (self.next * 2).min(MOST);
        pause
    }

    pub fn reset(&mut self) {
        self.next = FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_a_second_and_start_over_after_a_reset() {
        let mut backoff = Backoff::default();
        let pauses: Vec<u64> = (0..7).map(|_| backoff.pause().as_millis() as u64).collect();
        assert_eq!(pauses, vec![50, 100, 200, 400, 800, 1000, 1000]);
        backoff.reset();
        assert_eq!(backoff.pause(), FIRST);
    }
}
