//! The store's other ways in, attacked: the peer port's snapshot handler
//! (another cluster's snapshot, a snapshot bigger than it claims or than
//! any store can be) and its lease requests, `Snapshot` downloads held open to pile up copies of
//! the database, and the data directory's mode. The peer protocol and the
//! download bound are capstan's own, so those run on capstan-store only;
//! the directory's mode is checked on etcd too.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use capstan_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use capstan_proto::etcdserverpb::SnapshotRequest;
use capstan_proto::peer::peer_client::PeerClient;
use capstan_proto::peer::SnapshotChunk;
use capstan_tests::store::on_reference_etcd;
use prost::Message;

use super::grpc::{self, block_on};
use super::members::{As, Members};

/// The parts of raft-rs's `eraftpb.Message` a snapshot message needs.
#[derive(Clone, PartialEq, prost::Message)]
struct RaftMessage {
    #[prost(int32, tag = "1")]
    msg_type: i32,
    #[prost(uint64, tag = "2")]
    to: u64,
    #[prost(uint64, tag = "3")]
    from: u64,
    #[prost(uint64, tag = "4")]
    term: u64,
    #[prost(message, optional, tag = "9")]
    snapshot: Option<RaftSnapshot>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RaftSnapshot {
    #[prost(bytes = "vec", tag = "1")]
    data: Vec<u8>,
}

/// What capstan's snapshot data says of the file that follows.
#[derive(Clone, PartialEq, prost::Message)]
struct SnapshotFile {
    #[prost(string, tag = "1")]
    path: String,
    #[prost(uint64, tag = "2")]
    size: u64,
    #[prost(uint32, tag = "3")]
    crc32: u32,
}

const MSG_APPEND: i32 = 3;
const MSG_SNAPSHOT: i32 = 7;

/// The member's cluster id and member id, as `endpoint status` shows them.
fn ids(store: &Members) -> (u64, u64) {
    let status = store.ok(0, As::Anonymous, &["endpoint", "status", "-w", "json"]);
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    let header = &status[0]["Status"]["header"];
    let id = |name: &str| header[name].as_u64().expect("an id");
    (id("cluster_id"), id("member_id"))
}

/// Streams a snapshot to the member's peer port: a first chunk with the
/// raft message claiming `declared` bytes, then `chunks` of 1 MiB.
fn send_snapshot(
    store: &Members,
    cluster_id: u64,
    msg_type: i32,
    declared: u64,
    chunks: usize,
) -> Result<(), tonic::Status> {
    let (_, member) = ids(store);
    let file = SnapshotFile {
        path: "/etc/passwd".into(),
        size: declared,
        crc32: 0,
    };
    let message = RaftMessage {
        msg_type,
        to: member,
        from: 0x1bad,
        term: 1_000,
        snapshot: Some(RaftSnapshot {
            data: file.encode_to_vec(),
        }),
    };
    let first = SnapshotChunk {
        from: 0x1bad,
        message: message.encode_to_vec(),
        data: Vec::new(),
        cluster_id,
    };
    let rest = (0..chunks).map(move |_| SnapshotChunk {
        from: 0x1bad,
        data: vec![b'x'; 1 << 20],
        ..Default::default()
    });
    let url = format!("http://127.0.0.1:{}", store.members[0].peer_port);
    block_on(async {
        let mut peer = PeerClient::new(grpc::channel(&url).await);
        let chunks = futures::stream::iter(std::iter::once(first).chain(rest));
        peer.snapshot(chunks).await.map(|_| ())
    })
}

fn snapshot_files(store: &Members) -> Vec<String> {
    let dir = store.members[0].data_dir.join("snap");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn the_peer_port_refuses_foreign_and_oversized_snapshots() {
    if on_reference_etcd() {
        return; // capstan's peer protocol
    }
    let store = Members::start(1, &[]);
    store.ok(0, As::Anonymous, &["put", "k", "kept"]);
    let (cluster_id, _) = ids(&store);

    let foreign = send_snapshot(&store, cluster_id ^ 1, MSG_SNAPSHOT, 16, 1).unwrap_err();
    assert_eq!(foreign.code(), tonic::Code::PermissionDenied, "{foreign:?}");
    let unnamed = send_snapshot(&store, 0, MSG_SNAPSHOT, 16, 1).unwrap_err();
    assert_eq!(unnamed.code(), tonic::Code::PermissionDenied, "{unnamed:?}");
    let not_a_snapshot = send_snapshot(&store, cluster_id, MSG_APPEND, 16, 1).unwrap_err();
    assert_eq!(
        not_a_snapshot.code(),
        tonic::Code::InvalidArgument,
        "{not_a_snapshot:?}"
    );
    let huge = send_snapshot(&store, cluster_id, MSG_SNAPSHOT, 1 << 50, 1).unwrap_err();
    assert_eq!(huge.code(), tonic::Code::ResourceExhausted, "{huge:?}");
    let longer = send_snapshot(&store, cluster_id, MSG_SNAPSHOT, 16, 8).unwrap_err();
    assert_eq!(longer.code(), tonic::Code::InvalidArgument, "{longer:?}");

    assert!(
        snapshot_files(&store).is_empty(),
        "{:?}",
        snapshot_files(&store)
    );
    let value = store.ok(0, As::Anonymous, &["get", "k", "--print-value-only"]);
    assert_eq!(value.trim(), "kept", "the state machine was not replaced");
}

#[test]
fn snapshot_downloads_are_bounded() {
    if on_reference_etcd() {
        return; // etcd streams from its database; capstan copies it first
    }
    let store = Members::start(1, &[]);
    let url = store.url(0);
    block_on(async {
        let value = "v".repeat(100 * 1024);
        for i in 0..60 {
            grpc::put(&url, &format!("big/{i}"), &value, None)
                .await
                .unwrap();
        }
        let mut open = Vec::new();
        let refused = loop {
            assert!(open.len() < 16, "16 downloads held open and none refused");
            let mut client = MaintenanceClient::new(grpc::channel(&url).await);
            match client.snapshot(SnapshotRequest {}).await {
                // Held, not read: the member cannot finish sending it.
                Ok(stream) => open.push(stream),
                Err(status) => break status,
            }
        };
        assert_eq!(
            refused.code(),
            tonic::Code::ResourceExhausted,
            "{refused:?}"
        );
        assert_eq!(refused.message(), "etcdserver: too many requests");
        drop(open);
        tokio::time::sleep(Duration::from_millis(500)).await;
    });
    let file = store.dir.path().join("after.db").display().to_string();
    store.ok(0, As::Anonymous, &["snapshot", "save", &file]);
}

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_new_data_directory_is_private() {
    let mut store = Members::start(1, &[]);
    let data_dir = store.members[0].data_dir.clone();
    assert_eq!(mode(&data_dir), 0o700, "{}", data_dir.display());

    // A folder someone made too open beforehand: used, and reported, as
    // etcd does.
    store.members[0].kill9();
    std::fs::remove_dir_all(&data_dir).unwrap();
    std::fs::create_dir(&data_dir).unwrap();
    std::fs::set_permissions(&data_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    store.restart(0);
    if !on_reference_etcd() {
        let log = store.members[0].log();
        assert!(
            log.contains("0755") && log.contains(&data_dir.display().to_string()),
            "a warning naming the folder and its mode: {log}"
        );
    }
}
