//! Generated protobuf and gRPC code.
//!
//! `mvccpb`, `authpb` and `etcdserverpb` are the etcd v3 wire API (same package, message
//! and field names as etcd, so etcd clients work unchanged); `capstan::internal`
//! holds the records Capstan writes to its raft log and its MVCC store.

#![allow(clippy::all, missing_docs)]

pub mod mvccpb {
    tonic::include_proto!("mvccpb");
}

pub mod authpb {
    tonic::include_proto!("authpb");
}

pub mod etcdserverpb {
    tonic::include_proto!("etcdserverpb");
}

pub mod capstan {
    pub mod internal {
        tonic::include_proto!("capstan.internal");
    }

    pub mod peer {
        tonic::include_proto!("capstan.peer");
    }
}

pub use capstan::{internal, peer};
