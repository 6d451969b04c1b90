//! The TLS flags, loaded through the same layers as the rest of the
//! configuration (defaults, file, `CAPSTAN_*` environment, flags).

use std::path::Path;

use clap::Args;
use serde::Deserialize;

use crate::error::{Result, StoreError};
use capstan_telemetry::settings::ConfigError;

/// etcd's TLS flags.
#[derive(Debug, Default, Clone, Args)]
pub struct TlsFlags {
    /// Certificate (PEM) served to clients; clients then use https://.
    #[arg(long)]
    pub cert_file: Option<String>,
    /// Private key (PEM) of --cert-file.
    #[arg(long)]
    pub key_file: Option<String>,
    /// CA (PEM) that client certificates must be signed by.
    #[arg(long)]
    pub trusted_ca_file: Option<String>,
    /// Refuse clients without a certificate signed by --trusted-ca-file.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub client_cert_auth: Option<bool>,
    /// Certificate (PEM) for peer traffic, served and presented to peers.
    #[arg(long)]
    pub peer_cert_file: Option<String>,
    /// Private key (PEM) of --peer-cert-file.
    #[arg(long)]
    pub peer_key_file: Option<String>,
    /// CA (PEM) that peers' certificates must be signed by.
    #[arg(long)]
    pub peer_trusted_ca_file: Option<String>,
    /// Refuse peers without a certificate signed by --peer-trusted-ca-file.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub peer_client_cert_auth: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
struct Layered {
    cert_file: String,
    key_file: String,
    trusted_ca_file: String,
    client_cert_auth: bool,
    peer_cert_file: String,
    peer_key_file: String,
    peer_trusted_ca_file: String,
    peer_client_cert_auth: bool,
}

/// One side's files: what it presents and whom it trusts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Side {
    pub cert_file: String,
    pub key_file: String,
    pub trusted_ca_file: String,
    pub client_cert_auth: bool,
}

impl Side {
    pub fn enabled(&self) -> bool {
        !self.cert_file.is_empty()
    }

    /// Refuses half a configuration before anything is served.
    pub fn validate(&self, prefix: &str) -> Result<()> {
        if self.cert_file.is_empty() != self.key_file.is_empty() {
            return Err(StoreError::Config(format!(
                "--{prefix}cert-file and --{prefix}key-file must be given together"
            )));
        }
        if self.client_cert_auth && self.trusted_ca_file.is_empty() {
            return Err(StoreError::Config(format!(
                "--{prefix}client-cert-auth needs --{prefix}trusted-ca-file"
            )));
        }
        Ok(())
    }
}

/// The client side and the peer side.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TlsSettings {
    pub client: Side,
    pub peer: Side,
}

impl TlsSettings {
    pub fn load(
        flags: &TlsFlags,
        file: Option<&Path>,
    ) -> std::result::Result<TlsSettings, ConfigError> {
        let mut defaults = config::Config::builder();
        for key in ["cert_file", "key_file", "trusted_ca_file"] {
            defaults = defaults
                .set_default(key, "")?
                .set_default(format!("peer_{key}"), "")?;
        }
        let defaults = defaults
            .set_default("client_cert_auth", false)?
            .set_default("peer_client_cert_auth", false)?;
        let text = |v: &Option<String>| v.clone();
        let flag = |v: Option<bool>| v.map(|b| b.to_string());
        let overrides = [
            ("cert_file", text(&flags.cert_file)),
            ("key_file", text(&flags.key_file)),
            ("trusted_ca_file", text(&flags.trusted_ca_file)),
            ("client_cert_auth", flag(flags.client_cert_auth)),
            ("peer_cert_file", text(&flags.peer_cert_file)),
            ("peer_key_file", text(&flags.peer_key_file)),
            ("peer_trusted_ca_file", text(&flags.peer_trusted_ca_file)),
            ("peer_client_cert_auth", flag(flags.peer_client_cert_auth)),
        ];
        let l: Layered = capstan_telemetry::settings::load_layered(defaults, file, &overrides)?;
        Ok(TlsSettings {
            client: Side {
                cert_file: l.cert_file,
                key_file: l.key_file,
                trusted_ca_file: l.trusted_ca_file,
                client_cert_auth: l.client_cert_auth,
            },
            peer: Side {
                cert_file: l.peer_cert_file,
                key_file: l.peer_key_file,
                trusted_ca_file: l.peer_trusted_ca_file,
                client_cert_auth: l.peer_client_cert_auth,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        tls: TlsFlags,
    }

    #[test]
    fn flags_take_etcds_names_and_bare_booleans() {
        let cli = Cli::parse_from([
            "x",
            "--cert-file",
            "s.pem",
            "--key-file",
            "s.key",
            "--client-cert-auth",
            "--peer-trusted-ca-file",
            "ca.pem",
            "--peer-client-cert-auth=false",
        ]);
        let settings = TlsSettings::load(&cli.tls, None).unwrap();
        assert_eq!(settings.client.cert_file, "s.pem");
        assert!(settings.client.client_cert_auth);
        assert_eq!(settings.peer.trusted_ca_file, "ca.pem");
        assert!(!settings.peer.client_cert_auth);
        assert!(!settings.peer.enabled());
    }
}
