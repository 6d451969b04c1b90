//! The Ready loop's inbox: one place the loop sleeps on, for messages from
//! other threads (clients' proposals, the disk threads' reports) and for
//! the sockets of its direct peer links (`transport::links`) at once.
//!
//! Messages go through a channel; a sender wakes the loop's poller only
//! when the loop says it is about to sleep, so a busy loop costs its
//! senders no system call.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::Arc;
use std::time::Duration;

use mio::{Events, Poll, Registry, Token, Waker};

use super::node_msg::NodeMsg;
use crate::transport::links::FIRST_TOKEN;
use crate::transport::{Feedback, LoopStopped};

/// The poller's token for "a message is waiting"; the links' sockets use
/// the tokens from `FIRST_TOKEN` on.
pub const WAKE_TOKEN: Token = Token(0);
const _: () = assert!(WAKE_TOKEN.0 < FIRST_TOKEN.0);

struct Wake {
    asleep: AtomicBool,
    waker: Waker,
}

/// Sends messages to the Ready loop, waking it if it sleeps.
#[derive(Clone)]
pub struct InboxSender {
    /// Always set; taken only by `drop`, so the channel is disconnected
    /// before the loop is woken to find it so.
    tx: Option<mpsc::Sender<NodeMsg>>,
    wake: Arc<Wake>,
}

impl InboxSender {
    pub fn send(&self, msg: NodeMsg) -> Result<(), LoopStopped> {
        let tx = self.tx.as_ref().ok_or(LoopStopped)?;
        tx.send(msg).map_err(|_| LoopStopped)?;
        // Paired with `Inbox::wait`: the loop marks itself asleep before
        // its last look at the channel, so either it sees this message or
        // this sender sees the mark.
        if self.wake.asleep.swap(false, Ordering::SeqCst) {
            let _ = self.wake.waker.wake();
        }
        Ok(())
    }

    /// The transport's way to this inbox.
    pub fn peer_feedback(&self) -> Feedback {
        let sender = self.clone();
        std::sync::Arc::new(move |event| sender.send(NodeMsg::Peer(event)))
    }
}

impl Drop for InboxSender {
    /// The last sender going away ends the loop's wait: it then finds the
    /// channel disconnected. (The inbox holds the other reference; no
    /// clone can race this one if it is the last sender.)
    fn drop(&mut self) {
        drop(self.tx.take());
        if Arc::strong_count(&self.wake) == 2 && self.wake.asleep.swap(false, Ordering::SeqCst) {
            let _ = self.wake.waker.wake();
        }
    }
}

/// What one wait brought.
pub enum Woken {
    /// Messages may be waiting, sockets may be ready (see `socket_events`).
    Ready,
    /// Every sender is gone.
    Disconnected,
}

pub struct Inbox {
    rx: Receiver<NodeMsg>,
    wake: Arc<Wake>,
    poll: Poll,
    events: Events,
    /// A message taken while checking before sleep, handed out next.
    held: Option<NodeMsg>,
}

impl Inbox {
    pub fn new() -> io::Result<(Inbox, InboxSender)> {
        let poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), WAKE_TOKEN)?;
        let wake = Arc::new(Wake {
            asleep: AtomicBool::new(false),
            waker,
        });
        let (tx, rx) = mpsc::channel();
        let inbox = Inbox {
            rx,
            wake: wake.clone(),
            poll,
            events: Events::with_capacity(256),
            held: None,
        };
        let sender = InboxSender { tx: Some(tx), wake };
        Ok((inbox, sender))
    }

    pub fn registry(&self) -> &Registry {
        self.poll.registry()
    }

    /// Sleeps until a message arrives, a socket is ready, or `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> io::Result<Woken> {
        self.events.clear();
        if self.held.is_some() {
            return self.peek_sockets();
        }
        if !timeout.is_zero() {
            self.wake.asleep.store(true, Ordering::SeqCst);
            match self.rx.try_recv() {
                Ok(msg) => {
                    self.wake.asleep.store(false, Ordering::SeqCst);
                    self.held = Some(msg);
                    return self.peek_sockets();
                }
                Err(TryRecvError::Disconnected) => return Ok(Woken::Disconnected),
                Err(TryRecvError::Empty) => {}
            }
        }
        let polled = self.poll.poll(&mut self.events, Some(timeout));
        self.wake.asleep.store(false, Ordering::SeqCst);
        match polled {
            Err(err) if err.kind() != io::ErrorKind::Interrupted => Err(err),
            _ => Ok(Woken::Ready),
        }
    }

    /// Collects ready sockets without sleeping.
    fn peek_sockets(&mut self) -> io::Result<Woken> {
        match self.poll.poll(&mut self.events, Some(Duration::ZERO)) {
            Err(err) if err.kind() != io::ErrorKind::Interrupted => Err(err),
            _ => Ok(Woken::Ready),
        }
    }

    /// The next waiting message, if any.
    pub fn next_message(&mut self) -> Option<NodeMsg> {
        self.held.take().or_else(|| self.rx.try_recv().ok())
    }

    /// The sockets the last wait found ready: (token, readable, writable).
    pub fn socket_events(&self, into: &mut Vec<(Token, bool, bool)>) {
        into.clear();
        for event in self.events.iter() {
            if event.token() != WAKE_TOKEN {
                let readable = event.is_readable() || event.is_read_closed() || event.is_error();
                into.push((event.token(), readable, event.is_writable()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_sent_to_a_sleeping_loop_wakes_it() {
        let (mut inbox, sender) = Inbox::new().unwrap();
        let (woke, woken) = mpsc::channel();
        let sleeper = std::thread::spawn(move || {
            // Longer than any test run: only the message can end it.
            inbox.wait(Duration::from_secs(24 * 3600)).unwrap();
            let _ = woke.send(());
            inbox
        });
        std::thread::sleep(Duration::from_millis(50));
        sender.send(NodeMsg::StateFlushed { upto: 7 }).ok().unwrap();
        woken
            .recv_timeout(Duration::from_secs(60))
            .expect("the loop slept through the message");
        let mut inbox = sleeper.join().unwrap();
        assert!(matches!(
            inbox.next_message(),
            Some(NodeMsg::StateFlushed { upto: 7 })
        ));
        assert!(inbox.next_message().is_none());
        drop(sender);
        assert!(matches!(
            inbox.wait(Duration::from_secs(1)).unwrap(),
            Woken::Disconnected
        ));
    }

    #[test]
    fn a_message_queued_before_the_wait_is_not_slept_on() {
        let (mut inbox, sender) = Inbox::new().unwrap();
        sender.send(NodeMsg::StateFlushed { upto: 3 }).ok().unwrap();
        inbox.wait(Duration::from_secs(30)).unwrap();
        assert!(matches!(
            inbox.next_message(),
            Some(NodeMsg::StateFlushed { upto: 3 })
        ));
    }
}
