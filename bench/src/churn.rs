//! Memory under compaction, after the scale run has loaded the server:
//! rounds that overwrite a tenth of the keys and then compact the history
//! up to the newest revision, with the server's RSS read after each round.
//! History grows by a tenth of the keys per round and compaction takes it
//! back, so the RSS should level off rather than climb round by round.

use std::time::Duration;

use etcd_client::CompactionOptions;
use tokio::task::JoinSet;

use crate::client::{connect_clients, within};
use crate::scale::{write_share, WRITERS};
use crate::servers::ServerProcess;

/// Overwrite-and-compact rounds.
pub const ROUNDS: usize = 4;
const CONNECTIONS: usize = 16;
/// Longest a compaction may take: etcd compacts a large history in
/// batches with pauses between them, and a physical compaction waits for
/// all of them (over 10 s for a million keys).
const COMPACTION_LIMIT: Duration = Duration::from_secs(600);

/// RSS (bytes) after each round.
pub async fn rounds(
    server: &ServerProcess,
    keys: usize,
    value_size: usize,
    timeout: Duration,
) -> Result<Vec<u64>, String> {
    let clients = connect_clients(&server.endpoint(), CONNECTIONS, None, timeout).await?;
    let overwritten = (keys / 10).max(1);
    let mut rss = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        let value = vec![b'a' + (round % 26) as u8; value_size];
        let mut writers = JoinSet::new();
        for writer in 0..WRITERS {
            let kv = clients[writer % clients.len()].kv_client();
            writers.spawn(write_share(
                kv,
                writer,
                (0, overwritten),
                value.clone(),
                timeout,
                false,
            ));
        }
        let mut newest = 0;
        while let Some(done) = writers.join_next().await {
            newest = newest.max(done.map_err(|err| format!("writer: {err}"))??);
        }
        let mut kv = clients[0].kv_client();
        let options = CompactionOptions::new().with_physical();
        within(COMPACTION_LIMIT, kv.compact(newest, Some(options))).await?;
        rss.push(server.rss_bytes().unwrap_or(0));
    }
    Ok(rss)
}
