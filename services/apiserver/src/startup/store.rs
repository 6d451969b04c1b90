//! The store as the flags reach it: encryption at rest, and a
//! connection once some member answers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::errors::StartError;
use crate::config::ApiserverConfig;
use crate::storage::encryption::{self, Encryption};
use crate::storage::{Connection, InProcessStore, StorageError, Store};

/// How long to wait for the store at start (an embedded store may still
/// be electing its leader).
const STORE_WAIT: Duration = Duration::from_secs(30);

/// The connection to the store's members (or to the store in this
/// process, through `in_process`), and the store over it that encrypts as
/// `--encryption-provider-config` says.
pub async fn open(
    config: &ApiserverConfig,
    in_process: Option<InProcessStore>,
) -> Result<(Connection, Store), StartError> {
    let encryption = encryption(config)?;
    let client = connect(config, in_process).await?;
    let store = Store::new(&client).with_encryption(encryption);
    Ok((client, store))
}

/// Encryption at rest as `--encryption-provider-config` says (nothing
/// encrypted without it); a file that cannot be used stops the start.
fn encryption(config: &ApiserverConfig) -> Result<Arc<Encryption>, StartError> {
    let file = &config.encryption_provider_config;
    if file.is_empty() {
        return Ok(Arc::new(Encryption::none()));
    }
    let rules =
        encryption::load(std::path::Path::new(file)).map_err(|error| StartError::Encryption {
            file: file.clone(),
            error,
        })?;
    let builtin: Vec<(String, String)> = crate::registry::kinds::all()
        .iter()
        .map(|s| (s.def().group.to_string(), s.def().resource.to_string()))
        .collect();
    tracing::info!(%file, rules = rules.len(), "encryption at rest configured");
    Ok(Arc::new(Encryption::new(
        &config.storage_prefix,
        rules,
        &builtin,
    )))
}

/// The store's members, once one of them answers a read (any member will
/// do: the connection moves to another when its member goes).
async fn connect(
    config: &ApiserverConfig,
    in_process: Option<InProcessStore>,
) -> Result<Connection, StorageError> {
    let connection = match in_process {
        Some(store) => Connection::in_process("the store in this process", store).await?,
        None => {
            let tls = config
                .etcd_tls()
                .map_err(|err| StorageError::Unavailable(err.to_string()))?;
            Connection::with_tls(&config.endpoints(), tls).await?
        }
    };
    let deadline = Instant::now() + STORE_WAIT;
    loop {
        match Store::new(&connection).current_revision().await {
            Ok(_) => return Ok(connection),
            Err(err) if Instant::now() >= deadline => return Err(err),
            Err(err) => {
                tracing::info!(%err, "waiting for the store");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
