//! Kept-alive webhook connections: after an answer is read, its HTTP/1.1
//! connection waits here for the next call to the same place (address,
//! TLS name and trusted CA), so a busy webhook costs one TCP and TLS
//! handshake per connection, not per request. A connection the webhook
//! closed is dropped when it is next looked at.

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::SendRequest;

/// Idle connections kept per place; more are closed after their answer.
const IDLE_PER_PLACE: usize = 32;

pub type Sender = SendRequest<Full<Bytes>>;

/// Where a connection goes: calls may share it only if all three match.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Place {
    pub address: String,
    pub server_name: String,
    pub ca_bundle: Vec<u8>,
}

#[derive(Default)]
pub struct Pool {
    idle: Mutex<HashMap<Place, Vec<Sender>>>,
}

impl Pool {
    /// An idle connection to `place` still open, if any.
    pub fn take(&self, place: &Place) -> Option<Sender> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let waiting = idle.get_mut(place)?;
        while let Some(sender) = waiting.pop() {
            if !sender.is_closed() {
                return Some(sender);
            }
        }
        None
    }

    /// Keeps `sender` for the next call to `place`, unless it is closed
    /// or enough are kept already.
    pub fn give_back(&self, place: Place, sender: Sender) {
        if sender.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let waiting = idle.entry(place).or_default();
        waiting.retain(|s| !s.is_closed());
        if waiting.len() < IDLE_PER_PLACE {
            waiting.push(sender);
        }
    }
}
