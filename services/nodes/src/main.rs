//! The `capstan-nodes` binary: simulated nodes against any API server.

use clap::Parser;

use capstan_client::connect::Connection;
use capstan_nodes::config::{Flags, NodesConfig};
use capstan_nodes::settings::Settings;

#[tokio::main]
async fn main() {
    let flags = Flags::parse();
    let settings =
        match NodesConfig::load(&flags).and_then(|c| Ok((Settings::parse(&c)?, c.log_level))) {
            Ok(settings) => settings,
            Err(err) => {
                eprintln!("capstan-nodes: {err}");
                std::process::exit(2);
            }
        };
    let (settings, log_level) = settings;
    capstan_telemetry::init_logging(&log_level);
    let connection = match Connection::from_settings(&settings.client, "capstan-nodes").await {
        Ok(connection) => connection,
        Err(err) => {
            eprintln!("capstan-nodes: {err}");
            std::process::exit(2);
        }
    };
    if let Err(err) =
        capstan_nodes::run(settings, connection, capstan_telemetry::shutdown_signal()).await
    {
        tracing::error!(%err, "capstan-nodes failed");
        std::process::exit(1);
    }
}
