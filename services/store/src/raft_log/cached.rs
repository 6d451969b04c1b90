//! The log as raft sees it, in memory: the entries after the last
//! truncation, the hard state and conf state, and how many bytes the
//! entries hold (the node drops the front of the log by count and by
//! bytes). Also the conversions between raft-rs's messages and the file's
//! records.

use std::collections::VecDeque;

use raft::eraftpb::{ConfState, Entry, EntryType, HardState};

use super::wal::{Position, WalEntry, WalRecord};
use crate::error::{Result, StoreError};

pub(super) fn encode<M: protobuf::Message>(message: &M) -> Vec<u8> {
    message
        .write_to_bytes()
        .expect("raft message encodes to a vec")
}

pub(super) fn decode<M: protobuf::Message>(bytes: &[u8]) -> Result<M> {
    M::parse_from_bytes(bytes).map_err(|err| StoreError::Corrupt(err.to_string()))
}

pub(super) fn to_wal(entry: &Entry) -> WalEntry {
    WalEntry {
        term: entry.term,
        index: entry.index,
        entry_type: entry.get_entry_type() as i32,
        data: entry.data.clone(),
        context: entry.context.clone(),
    }
}

fn from_wal(entry: WalEntry) -> Result<Entry> {
    let entry_type = match entry.entry_type {
        0 => EntryType::EntryNormal,
        1 => EntryType::EntryConfChange,
        2 => EntryType::EntryConfChangeV2,
        other => return Err(StoreError::Corrupt(format!("raft entry type {other}"))),
    };
    let mut out = Entry::default();
    out.set_entry_type(entry_type);
    out.term = entry.term;
    out.index = entry.index;
    out.data = entry.data;
    out.context = entry.context;
    Ok(out)
}

/// The log as raft sees it.
#[derive(Default)]
pub(super) struct Cached {
    pub(super) hard_state: HardState,
    pub(super) conf_state: ConfState,
    pub(super) truncated_index: u64,
    pub(super) truncated_term: u64,
    /// `entries[i]` is entry `truncated_index + 1 + i`.
    pub(super) entries: VecDeque<Entry>,
    /// The payload bytes `entries` hold (what bounds the log's memory).
    bytes: usize,
    /// Conf states set since this process opened the log.
    pub(super) conf_changes: u64,
}

/// The bytes an entry holds beyond its fixed size.
fn payload(entry: &Entry) -> usize {
    entry.data.len() + entry.context.len()
}

impl Cached {
    pub(super) fn last_index(&self) -> u64 {
        self.truncated_index + self.entries.len() as u64
    }

    /// The payload bytes of the entries held.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Drops entries up to and including `position.index`.
    pub(super) fn truncate(&mut self, position: Position) {
        let drop = position.index.saturating_sub(self.truncated_index) as usize;
        let dropped: usize = self
            .entries
            .drain(..drop.min(self.entries.len()))
            .map(|e| payload(&e))
            .sum();
        self.bytes -= dropped;
        self.truncated_index = position.index;
        self.truncated_term = position.term;
    }

    /// Drops every entry: the log starts after `position` (a snapshot's).
    pub(super) fn clear(&mut self, position: Position) {
        self.entries.clear();
        self.bytes = 0;
        self.truncated_index = position.index;
        self.truncated_term = position.term;
    }

    /// The newest index at or before `upto` whose dropping leaves at most
    /// `max_entries` entries and `max_bytes` payload bytes in
    /// `..=upto` (at least `upto - max_entries`).
    pub(super) fn cut_keeping(&self, upto: u64, max_entries: u64, max_bytes: usize) -> u64 {
        let upto = upto.min(self.last_index());
        let mut cut = upto;
        let mut kept_bytes = 0;
        while cut > self.truncated_index && upto - cut < max_entries {
            let entry = &self.entries[(cut - self.truncated_index - 1) as usize];
            if kept_bytes + payload(entry) > max_bytes {
                break;
            }
            kept_bytes += payload(entry);
            cut -= 1;
        }
        cut
    }

    /// Puts `entries` in place, replacing any conflicting suffix.
    pub(super) fn splice(&mut self, entries: impl IntoIterator<Item = Entry>) -> Result<()> {
        let mut entries = entries.into_iter().peekable();
        let Some(first) = entries.peek() else {
            return Ok(());
        };
        if first.index <= self.truncated_index || first.index > self.last_index() + 1 {
            return Err(StoreError::Corrupt(format!(
                "raft entry {} does not fit a log holding {}..={}",
                first.index,
                self.truncated_index + 1,
                self.last_index()
            )));
        }
        let keep = (first.index - self.truncated_index - 1) as usize;
        let replaced: usize = self.entries.range(keep..).map(payload).sum();
        self.entries.truncate(keep);
        self.bytes -= replaced;
        for entry in entries {
            self.bytes += payload(&entry);
            self.entries.push_back(entry);
        }
        Ok(())
    }

    pub(super) fn replay(&mut self, record: WalRecord) -> Result<()> {
        if let Some(position) = record.truncated {
            self.truncate(position);
        }
        if let Some(bytes) = record.hard_state {
            self.hard_state = decode(&bytes)?;
        }
        if let Some(bytes) = record.conf_state {
            self.conf_state = decode(&bytes)?;
        }
        let entries = record
            .entries
            .into_iter()
            .map(from_wal)
            .collect::<Result<Vec<_>>>()?;
        self.splice(entries)
    }

    /// One record holding the whole log, to rewrite the file with.
    pub(super) fn full_record(&self) -> WalRecord {
        WalRecord {
            entries: self.entries.iter().map(to_wal).collect(),
            hard_state: Some(encode(&self.hard_state)),
            conf_state: Some(encode(&self.conf_state)),
            truncated: Some(Position {
                index: self.truncated_index,
                term: self.truncated_term,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, size: usize) -> Entry {
        let mut entry = Entry::default();
        entry.index = index;
        entry.term = 1;
        entry.data = vec![0; size].into();
        entry
    }

    /// Entries 1..=10 of 100 bytes each.
    fn log() -> Cached {
        let mut cached = Cached::default();
        cached.splice((1..=10).map(|i| entry(i, 100))).unwrap();
        cached
    }

    #[test]
    fn bytes_follow_appends_replaced_suffixes_truncations_and_snapshots() {
        let mut cached = log();
        assert_eq!(cached.bytes(), 1000);
        // A new leader's entries replace 8..=10 with one of 50 bytes.
        cached.splice([entry(8, 50)]).unwrap();
        assert_eq!((cached.last_index(), cached.bytes()), (8, 750));
        cached.truncate(Position { index: 3, term: 1 });
        assert_eq!(cached.bytes(), 450);
        cached.clear(Position { index: 20, term: 2 });
        assert_eq!((cached.last_index(), cached.bytes()), (20, 0));
    }

    #[test]
    fn a_cut_keeps_at_most_the_entries_and_bytes_asked_for() {
        let cached = log();
        // By count: keep 4 of ..=8, so drop ..=4.
        assert_eq!(cached.cut_keeping(8, 4, usize::MAX), 4);
        // By bytes: 250 bytes keep two entries of 100.
        assert_eq!(cached.cut_keeping(8, 4, 250), 6);
        // Nothing kept, and never past the end or before the front.
        assert_eq!(cached.cut_keeping(8, 0, usize::MAX), 8);
        assert_eq!(cached.cut_keeping(50, 0, 0), 10);
        assert_eq!(cached.cut_keeping(8, 100, usize::MAX), 0);
    }
}
