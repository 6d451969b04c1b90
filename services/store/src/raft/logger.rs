//! Forwards raft-rs's `slog` records to `tracing`, so the store has one log.

use std::fmt::{self, Write as _};

use slog::{Drain, Key, Level, OwnedKVList, Record, Serializer, KV};

struct Fields(String);

impl Serializer for Fields {
    fn emit_arguments(&mut self, key: Key, val: &fmt::Arguments) -> slog::Result {
        let _ = write!(self.0, " {key}={val}");
        Ok(())
    }
}

struct TracingDrain;

impl Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &Record, values: &OwnedKVList) -> Result<(), slog::Never> {
        let mut fields = Fields(String::new());
        let _ = record.kv().serialize(record, &mut fields);
        let _ = values.serialize(record, &mut fields);
        let msg = record.msg();
        let fields = fields.0;
        match record.level() {
            Level::Critical | Level::Error => tracing::error!(target: "raft", "{msg}{fields}"),
            Level::Warning => tracing::warn!(target: "raft", "{msg}{fields}"),
            Level::Info => tracing::info!(target: "raft", "{msg}{fields}"),
            Level::Debug => tracing::debug!(target: "raft", "{msg}{fields}"),
            Level::Trace => tracing::trace!(target: "raft", "{msg}{fields}"),
        }
        Ok(())
    }
}

/// A slog logger for raft-rs that writes through `tracing`.
pub fn raft_logger() -> slog::Logger {
    slog::Logger::root(TracingDrain.fuse(), slog::o!())
}
