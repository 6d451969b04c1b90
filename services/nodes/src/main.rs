//! The `capstan-nodes` binary: simulated nodes against any API server.

use clap::Parser;

use capstan_client::connect::Connection;
use capstan_nodes::config::{Flags, NodesConfig};
use capstan_nodes::impersonation;
use capstan_nodes::settings::Settings;

// jemalloc, tuned as shared/allocator explains.
capstan_allocator::install!();

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
    if let Some(user) = &flags.grant_impersonation_to {
        return grant(&settings, &connection, user).await;
    }
    if let Err(err) =
        capstan_nodes::run(settings, connection, capstan_telemetry::shutdown_signal()).await
    {
        tracing::error!(%err, "capstan-nodes failed");
        std::process::exit(1);
    }
}

/// `--grant-impersonation-to USER`: the one-off step an admin runs before
/// the nodes start under their own identity.
async fn grant(settings: &Settings, connection: &Connection, user: &str) {
    let names: Vec<String> = (0..settings.nodes)
        .map(|i| settings.template.name(i))
        .collect();
    let role = impersonation::role_name(&settings.template.name_prefix);
    let within = std::time::Duration::from_secs(120);
    let client = connection.client();
    match impersonation::grant_when_ready(&client, &role, user, &names, within).await {
        Ok(()) => println!(
            "{user} may impersonate the users of {} nodes ({}..): ClusterRole and ClusterRoleBinding {role}",
            names.len(),
            names.first().map_or("", String::as_str)
        ),
        Err(err) => {
            eprintln!("capstan-nodes: {err}");
            std::process::exit(1);
        }
    }
}
