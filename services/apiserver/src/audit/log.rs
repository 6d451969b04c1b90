//! The log backend (`--audit-log-path`): events as JSON lines, written by
//! one thread of its own so a request never waits on the disk. Requests
//! hand their events to a bounded queue, as kube-apiserver's batch
//! backend does; the thread writes what is queued through a buffer and
//! flushes whenever the queue runs dry. A full queue (the disk far behind)
//! drops the event and counts an error rather than stalling requests.

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};

use prometheus_client::metrics::counter::Counter;

use super::event::Event;
use super::rotate::{Limits, RotatingFile};

/// kube's batch backend buffers 10,000 events.
const QUEUE: usize = 10_000;

/// Where events go.
pub trait Backend: Send + Sync {
    fn process(&self, event: Event);
}

/// Counters of what the backend did (apiserver_audit_*).
#[derive(Clone, Default)]
pub struct Counters {
    pub events: Counter,
    pub errors: Counter,
}

pub struct LogBackend {
    queue: SyncSender<Event>,
    counters: Counters,
}

enum Output {
    Stdout(io::Stdout),
    File(RotatingFile),
}

impl Output {
    fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        match self {
            Output::Stdout(out) => out.write_all(line),
            Output::File(file) => file.write_line(line),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Output::Stdout(out) => out.flush(),
            Output::File(file) => file.flush(),
        }
    }
}

impl LogBackend {
    /// Opens the log (`-` is standard output) and starts its writer.
    pub fn start(path: &str, limits: Limits, counters: Counters) -> io::Result<LogBackend> {
        let output = match path {
            "-" => Output::Stdout(io::stdout()),
            path => Output::File(RotatingFile::open(&PathBuf::from(path), limits)?),
        };
        let (queue, events) = mpsc::sync_channel(QUEUE);
        let errors = counters.errors.clone();
        std::thread::Builder::new()
            .name("audit-log".into())
            .spawn(move || write_all(events, output, errors))?;
        Ok(LogBackend { queue, counters })
    }
}

impl Backend for LogBackend {
    fn process(&self, event: Event) {
        match self.queue.try_send(event) {
            Ok(()) => {
                self.counters.events.inc();
            }
            Err(TrySendError::Full(event) | TrySendError::Disconnected(event)) => {
                self.counters.errors.inc();
                tracing::error!(audit_id = %event.audit_id, "audit log queue full or closed: event dropped");
            }
        }
    }
}

/// The writer thread: until every sender is gone, write what is queued,
/// then flush once the queue is empty.
fn write_all(events: Receiver<Event>, mut output: Output, errors: Counter) {
    let mut line = Vec::with_capacity(4096);
    while let Ok(first) = events.recv() {
        let mut next = Some(first);
        while let Some(event) = next {
            line.clear();
            serde_json::to_writer(&mut line, &event).expect("events always serialise");
            line.push(b'\n');
            if let Err(err) = output.write_line(&line) {
                errors.inc();
                tracing::error!(%err, "writing the audit log");
            }
            next = events.try_recv().ok();
        }
        if let Err(err) = output.flush() {
            errors.inc();
            tracing::error!(%err, "flushing the audit log");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::event::{Stage, UserInfo};
    use std::time::{Duration, Instant};

    #[test]
    fn events_reach_the_file_as_json_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let counters = Counters::default();
        let backend =
            LogBackend::start(path.to_str().unwrap(), Limits::default(), counters.clone()).unwrap();
        for i in 0..3 {
            let user = UserInfo {
                username: format!("u{i}"),
                ..UserInfo::default()
            };
            let mut event = Event::received(format!("{i}"), "/".into(), "get".into(), user);
            event.at(Stage::ResponseComplete);
            backend.process(event);
        }
        // The writer flushes once it has emptied the queue.
        let deadline = Instant::now() + Duration::from_secs(10);
        let text = loop {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if text.lines().count() == 3 || Instant::now() > deadline {
                break text;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let users: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .map(|e| e["user"]["username"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(users, ["u0", "u1", "u2"]);
        assert_eq!(counters.events.get(), 3);
        assert_eq!(counters.errors.get(), 0);
    }
}
