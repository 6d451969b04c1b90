//! The components this API server runs in its own process by default, as
//! k3s does: today kube-controller-manager's loops
//! (`capstan-controller-manager`). They are ordinary API clients of this
//! server over loopback HTTPS, with a client certificate of their own
//! (`system:kube-controller-manager`, signed in memory with the client
//! CA's key, which the server finds beside `--client-ca-file` as
//! `capstan certificates` and `capstan` lay it out), so their writes pass
//! authentication, RBAC, admission and audit like anyone's. With several
//! API servers each runs one, and leader election lets one lead.

use std::path::{Path, PathBuf};

use capstan_controller_manager::embed::{self, Embedded};
use capstan_controller_manager::Flags as ControllerFlags;
use serde::Deserialize;
use time::{Duration, OffsetDateTime};

use crate::config::ApiserverConfig;
use crate::pki::{self, Authority};
use capstan_telemetry::settings::ConfigError;

/// The user the embedded controller manager authenticates as.
const CONTROLLER_MANAGER: &str = "system:kube-controller-manager";

#[derive(Debug, Default, Clone, clap::Args)]
pub struct EmbeddedFlags {
    /// Do not run kube-controller-manager's loops in this process (run
    /// `capstan-controller-manager` apart instead); k3s's flag.
    #[arg(long)]
    pub disable_controller_manager: Option<bool>,
    /// Credentials for the in-process controller manager; by default a
    /// client certificate signed with the client CA's key
    /// (`client-ca.key` beside `--client-ca-file`).
    #[arg(long)]
    pub controller_manager_kubeconfig: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
pub struct Settings {
    pub disable_controller_manager: bool,
    pub controller_manager_kubeconfig: String,
}

impl Settings {
    pub fn load(flags: &EmbeddedFlags, file: Option<&Path>) -> Result<Settings, ConfigError> {
        let defaults = config::Config::builder()
            .set_default("disable_controller_manager", false)?
            .set_default("controller_manager_kubeconfig", "")?;
        let overrides = [
            (
                "disable_controller_manager",
                flags.disable_controller_manager.map(|b| b.to_string()),
            ),
            (
                "controller_manager_kubeconfig",
                flags.controller_manager_kubeconfig.clone(),
            ),
        ];
        capstan_telemetry::settings::load_layered(defaults, file, &overrides)
    }
}

/// Starts the controller manager unless disabled; None (and a log line
/// saying why) when it is disabled or has no credentials.
pub fn start_controller_manager(config: &ApiserverConfig) -> Option<Embedded> {
    if config.embedded.disable_controller_manager {
        return None;
    }
    // CAPSTAN_* variables reach it as they reach a separate process.
    let mut settings = match capstan_controller_manager::Settings::load(&ControllerFlags::default())
    {
        Ok(settings) => settings,
        Err(err) => {
            tracing::error!(%err, "controller manager settings; not started");
            return None;
        }
    };
    settings.secure_port = 0;
    let started = match config.embedded.controller_manager_kubeconfig.as_str() {
        "" => credentials(config).map(|c| embed::start(c, settings)),
        file => {
            settings.kubeconfig = Some(PathBuf::from(file));
            Ok(embed::start_from_kubeconfig(settings))
        }
    };
    match started {
        Ok(Ok(embedded)) => Some(embedded),
        Ok(Err(err)) => {
            tracing::error!(%err, "controller manager thread; not started");
            None
        }
        Err(reason) => {
            tracing::warn!(%reason, "no credentials for the in-process controller manager: not started \
                (give --controller-manager-kubeconfig, or run capstan-controller-manager apart)");
            None
        }
    }
}

/// The loopback address, this server's CA, and a fresh client
/// certificate as `system:kube-controller-manager`.
fn credentials(
    config: &ApiserverConfig,
) -> Result<capstan_client::connect::InlineCredentials, String> {
    if config.secure_port == 0 || config.client_ca_file.is_empty() {
        return Err("the server does not serve HTTPS with client certificates".into());
    }
    let client_ca = Path::new(&config.client_ca_file);
    let dir = client_ca.parent().unwrap_or(Path::new("."));
    let layout = pki::Pki::at(dir);
    let read = |path: &Path| pki::read(path).map_err(|e| e.to_string());
    let authority = Authority::load(&read(client_ca)?, &read(&layout.client_ca_key())?)
        .map_err(|e| e.to_string())?;
    let issued = authority
        .issue_client(
            CONTROLLER_MANAGER,
            None,
            OffsetDateTime::now_utc() - Duration::hours(1),
            Duration::days(365),
        )
        .map_err(|e| e.to_string())?;
    let ca_pem = match config.root_ca_file.as_str() {
        "" => read(&server_ca(config, &layout))?,
        file => read(Path::new(file))?,
    };
    let host = match config.bind_address.as_str() {
        "0.0.0.0" | "::" | "" => "127.0.0.1",
        address => address,
    };
    Ok(capstan_client::connect::InlineCredentials {
        server: format!("https://{host}:{}", config.secure_port),
        ca_pem,
        cert_pem: issued.certificate,
        key_pem: issued.key,
    })
}

/// The CA that signed the serving certificate: `server-ca.crt` beside it.
fn server_ca(config: &ApiserverConfig, client_layout: &pki::Pki) -> PathBuf {
    let serving = Path::new(&config.tls_cert_file);
    match serving.parent() {
        Some(dir) if !config.tls_cert_file.is_empty() => pki::Pki::at(dir).server_ca(),
        _ => client_layout.server_ca(),
    }
}
