//! The `capstan-nodes` binary: simulated nodes against any API server.

use clap::Parser;

use capstan_client::connect::Connection;
use capstan_nodes::config::{Flags, NodesConfig};
use capstan_nodes::impersonation;
use capstan_nodes::settings::Settings;

/// mimalloc rather than glibc's malloc: every request allocates (JSON
/// trees, protobuf messages, watch events), and under glibc malloc and
/// free were 17% of the control plane's CPU samples; glibc's per-thread
/// arenas also kept freed memory resident. Built without transparent huge
/// pages (`no_thp`): mimalloc otherwise asks for them on its arenas, and
/// each fresh 2 MB page is zeroed whole on first touch.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
