//! Direct links over real loopback sockets, driven the way the Ready loop
//! drives them: wait on a poller, hand the links what it found and what
//! their feedback reported.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Events, Poll};
use raft::eraftpb::{Message, MessageType};

use super::frame::{put_frame, FrameReader, MAGIC};
use super::DirectLinks;
use crate::membership::identity::ClusterId;
use crate::metrics::RaftMetrics;
use crate::transport::interface::{LoopStopped, PeerEvent};
use capstan_proto::peer::RaftBatch;
use protobuf::Message as _;

/// Long enough for a loaded machine; only a broken link waits it out.
const PATIENCE: Duration = Duration::from_secs(60);

fn heartbeat(to: u64, term: u64) -> Message {
    let mut message = Message::default();
    message.set_msg_type(MessageType::MsgHeartbeat);
    message.from = 1;
    message.to = to;
    message.term = term;
    message
}

/// What a Ready loop has for the links: a poller, and what they reported.
struct Inbox {
    poll: Poll,
    reports: mpsc::Receiver<PeerEvent>,
}

fn links() -> (Inbox, DirectLinks) {
    let poll = Poll::new().unwrap();
    let registry = poll.registry().try_clone().unwrap();
    let (reported, reports) = mpsc::channel();
    let feedback = Arc::new(move |event| reported.send(event).map_err(|_| LoopStopped));
    let links = DirectLinks::new(
        1,
        ClusterId::new(9),
        feedback,
        registry,
        RaftMetrics::default(),
    );
    (Inbox { poll, reports }, links)
}

/// One turn of the loop: reports for the links, then their sockets.
fn turn(inbox: &mut Inbox, links: &mut DirectLinks, received: &mut Vec<Message>) {
    let mut events = Events::with_capacity(64);
    inbox
        .poll
        .poll(&mut events, Some(Duration::from_millis(20)))
        .unwrap();
    while let Ok(event) = inbox.reports.try_recv() {
        if let PeerEvent::LinkUp {
            to,
            generation,
            stream,
            tls,
        } = event
        {
            links.link_up(to, generation, stream, tls);
        }
    }
    let mut unreachable = Vec::new();
    for event in events.iter() {
        let readable = event.is_readable() || event.is_read_closed() || event.is_error();
        let writable = event.is_writable();
        links.on_event(
            event.token(),
            readable,
            writable,
            received,
            &mut unreachable,
        );
    }
}

/// Reads the next frame, turning the loop while none has arrived.
fn next_frame(
    socket: &mut TcpStream,
    reader: &mut FrameReader,
    inbox: &mut Inbox,
    links: &mut DirectLinks,
) -> RaftBatch {
    socket
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(batch) = reader.next_batch().unwrap() {
            return batch;
        }
        assert!(Instant::now() < deadline, "no frame came");
        turn(inbox, links, &mut Vec::new());
        let spare = reader.spare(4096);
        match socket.read(spare) {
            Ok(0) => panic!("the link closed"),
            Ok(n) => reader.filled(n),
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(err) if err.kind() == std::io::ErrorKind::TimedOut => {}
            Err(err) => panic!("reading the link: {err}"),
        }
    }
}

#[test]
fn messages_sent_before_and_after_the_link_is_up_arrive_in_order() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _entered = runtime.enter();
    let peer = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", peer.local_addr().unwrap());
    let (mut inbox, mut links) = links();
    links.set_peers(&[(1, vec!["http://127.0.0.1:1".into()]), (2, vec![url])]);
    assert!(links.handles(2) && !links.handles(1), "a link to itself");

    let (mut rest, mut unreachable) = (Vec::new(), Vec::new());
    links.send(vec![heartbeat(2, 1)], &mut rest, &mut unreachable);
    assert!(rest.is_empty() && unreachable.is_empty());
    let accepting = std::thread::spawn(move || peer.accept().unwrap().0);
    let deadline = Instant::now() + PATIENCE;
    while !accepting.is_finished() && Instant::now() < deadline {
        turn(&mut inbox, &mut links, &mut Vec::new());
    }
    let mut socket = accepting.join().unwrap();
    socket.set_read_timeout(Some(PATIENCE)).unwrap();
    // The dialer writes magic and hello before it hands the link over.
    let mut magic = [0u8; 8];
    socket.read_exact(&mut magic).unwrap();
    assert_eq!(&magic, MAGIC);
    let mut reader = FrameReader::default();
    let hello = next_frame(&mut socket, &mut reader, &mut inbox, &mut links);
    assert_eq!(
        (hello.from, hello.cluster_id, hello.messages.len()),
        (1, 9, 0)
    );

    // The link comes up in a later turn; then both heartbeats go, in order.
    let mut snapshot = heartbeat(2, 3);
    snapshot.set_msg_type(MessageType::MsgSnapshot);
    links.send(vec![heartbeat(2, 2), snapshot], &mut rest, &mut unreachable);
    assert_eq!(rest.len(), 1, "snapshots are left to gRPC");
    let mut terms = Vec::new();
    while terms.len() < 2 {
        let batch = next_frame(&mut socket, &mut reader, &mut inbox, &mut links);
        for bytes in batch.messages {
            terms.push(Message::parse_from_bytes(&bytes).unwrap().term);
        }
    }
    assert_eq!(terms, vec![1, 2]);
}

#[test]
fn an_inbound_link_is_read_and_a_newer_one_from_the_same_peer_replaces_it() {
    let (mut inbox, mut links) = links();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let dial = || {
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let server = listener.accept().unwrap().0;
        server.set_nonblocking(true).unwrap();
        client.set_read_timeout(Some(PATIENCE)).unwrap();
        (client, server)
    };
    let (mut first, server) = dial();
    links.inbound(2, server, None);
    let mut bytes = Vec::new();
    for term in [5, 6] {
        let batch = RaftBatch {
            from: 2,
            cluster_id: 0,
            messages: vec![heartbeat(1, term).write_to_bytes().unwrap()],
        };
        put_frame(&batch, &mut bytes);
    }
    // Cut in the middle of a frame: the rest comes in a later read.
    first.write_all(&bytes[..bytes.len() - 3]).unwrap();
    let mut received = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    while received.is_empty() && Instant::now() < deadline {
        turn(&mut inbox, &mut links, &mut received);
    }
    first.write_all(&bytes[bytes.len() - 3..]).unwrap();
    while received.len() < 2 && Instant::now() < deadline {
        turn(&mut inbox, &mut links, &mut received);
    }
    let terms: Vec<u64> = received.iter().map(|m| m.term).collect();
    assert_eq!(terms, vec![5, 6]);

    let (_second, server) = dial();
    links.inbound(2, server, None);
    let mut buf = [0u8; 1];
    assert_eq!(
        first.read(&mut buf).unwrap(),
        0,
        "the older link stays open"
    );
}
