//! A full copy of the keyspace, to check that a request changed nothing.

use etcd_client::{Client, GetOptions};

/// One key with all of its metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub create_revision: i64,
    pub mod_revision: i64,
    pub version: i64,
    pub lease: i64,
}

/// Every key of the store, and the store revision it was read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyspace {
    pub revision: i64,
    pub entries: Vec<Entry>,
}

/// Reads the whole keyspace in one linearizable range.
pub async fn read_keyspace(client: &mut Client) -> Keyspace {
    let response = client
        .get(vec![0u8], Some(GetOptions::new().with_all_keys()))
        .await
        .expect("read the whole keyspace");
    Keyspace {
        revision: response.header().expect("response header").revision(),
        entries: response
            .kvs()
            .iter()
            .map(|kv| Entry {
                key: kv.key().to_vec(),
                value: kv.value().to_vec(),
                create_revision: kv.create_revision(),
                mod_revision: kv.mod_revision(),
                version: kv.version(),
                lease: kv.lease(),
            })
            .collect(),
    }
}
