//! OpenAPI: v3 documents per group-version (`v3.rs`), the v2 document
//! merged from them (`v2.rs`, protobuf in `v2_proto.rs`), and the routes
//! that serve them (`serve.rs`).

mod serve;
mod v2;
mod v2_proto;
mod v3;

pub use serve::{document, root, v2};
pub use v3::Documents;
