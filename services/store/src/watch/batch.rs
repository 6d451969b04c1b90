//! How catch-up events are grouped into watch responses.
//!
//! etcd 3.4 sends a watcher that replays history many events per
//! response: at most 1,000 distinct revisions of the watcher's own events
//! each (`watchBatchMaxRevs`), never splitting one revision's events
//! (a txn's events arrive together). etcd does not bound the response's
//! size; we also close a response before it passes a byte budget (the
//! member's `--max-request-bytes`), because clients built on tonic refuse
//! messages above 4 MiB by default. A single revision larger than the
//! budget still goes whole, in a response of its own.

use capstan_proto::mvccpb::Event;
use prost::Message;

/// Most distinct revisions in one catch-up response (etcd's
/// `watchBatchMaxRevs`).
pub const MAX_REVISIONS_PER_RESPONSE: usize = 1000;

/// The events of one response being filled.
#[derive(Debug, Default)]
pub struct ResponseBatch {
    max_bytes: usize,
    events: Vec<Event>,
    /// The first revision in `events` (0 when empty).
    first_rev: i64,
    revisions: usize,
    bytes: usize,
}

impl ResponseBatch {
    pub fn new(max_bytes: usize) -> Self {
        ResponseBatch {
            max_bytes,
            ..Default::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The first revision not yet sent if this batch is dropped unsent.
    pub fn first_revision(&self) -> i64 {
        self.first_rev
    }

    /// Whether one more revision with these events belongs in this
    /// response, or the response must be sent first.
    pub fn fits(&self, events: &[Event]) -> bool {
        if self.is_empty() {
            return true;
        }
        self.revisions < MAX_REVISIONS_PER_RESPONSE
            && self.bytes + encoded_len(events) <= self.max_bytes
    }

    /// Adds the events of revision `rev` (the caller checked [`fits`]).
    ///
    /// [`fits`]: ResponseBatch::fits
    pub fn push(&mut self, rev: i64, events: Vec<Event>) {
        if self.is_empty() {
            self.first_rev = rev;
        }
        self.revisions += 1;
        self.bytes += encoded_len(&events);
        self.events.extend(events);
    }

    /// The events to send, leaving the batch empty for the next response.
    pub fn take(&mut self) -> Vec<Event> {
        self.first_rev = 0;
        self.revisions = 0;
        self.bytes = 0;
        std::mem::take(&mut self.events)
    }
}

/// The bytes these events take inside a WatchResponse (field tag, length
/// and body each).
fn encoded_len(events: &[Event]) -> usize {
    events
        .iter()
        .map(|event| {
            let len = event.encoded_len();
            1 + prost::length_delimiter_len(len) + len
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use capstan_proto::mvccpb::KeyValue;

    fn event(rev: i64, value_len: usize) -> Event {
        Event {
            kv: Some(KeyValue {
                key: b"k".to_vec(),
                mod_revision: rev,
                value: vec![b'v'; value_len],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Fills responses from revisions of `sizes` events of `value_len`
    /// bytes; returns each response's (first revision, event count).
    fn group(sizes: &[usize], value_len: usize, max_bytes: usize) -> Vec<(i64, usize)> {
        let mut batch = ResponseBatch::new(max_bytes);
        let mut sent = Vec::new();
        for (i, &count) in sizes.iter().enumerate() {
            let rev = i as i64 + 2;
            let events: Vec<_> = (0..count).map(|_| event(rev, value_len)).collect();
            if !batch.fits(&events) {
                sent.push((batch.first_revision(), batch.take().len()));
            }
            batch.push(rev, events);
        }
        if !batch.is_empty() {
            sent.push((batch.first_revision(), batch.take().len()));
        }
        sent
    }

    #[test]
    fn at_most_a_thousand_revisions_per_response() {
        let sizes = vec![1; 2500];
        assert_eq!(
            group(&sizes, 10, usize::MAX),
            [(2, 1000), (1002, 1000), (2002, 500)]
        );
    }

    #[test]
    fn a_revision_with_many_events_counts_once_and_is_never_split() {
        let mut sizes = vec![1; 999];
        sizes.push(5); // a txn of five puts, the 1,000th revision
        sizes.push(3);
        assert_eq!(group(&sizes, 10, usize::MAX), [(2, 1004), (1002, 3)]);
    }

    #[test]
    fn the_byte_budget_closes_a_response_between_revisions() {
        // Each event is a little over 1 KiB; 10 KiB holds nine of them.
        let sizes = vec![1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1];
        let sent = group(&sizes, 1024, 10 * 1024);
        assert_eq!(sent, [(2, 9), (11, 3)]);
    }

    #[test]
    fn a_revision_above_the_budget_goes_whole_and_alone() {
        let sent = group(&[1, 20, 1], 1024, 10 * 1024);
        assert_eq!(sent, [(2, 1), (3, 20), (4, 1)]);
    }
}
