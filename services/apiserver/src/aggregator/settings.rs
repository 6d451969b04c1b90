//! The aggregator's flags, kube-apiserver's names: the front-proxy client
//! certificate presented to extension API servers, and the requestheader
//! settings (who may vouch for a user in headers, and which headers),
//! which this server's own requestheader authenticator uses and
//! publishes in kube-system/extension-apiserver-authentication.

use std::path::Path;

use serde::Deserialize;

use super::tls::ClientIdentity;
use crate::serving::tls::TlsError;
use capstan_telemetry::settings::ConfigError;

#[derive(Debug, Default, Clone, clap::Args)]
pub struct AggregatorFlags {
    /// Client certificate (PEM) presented to extension API servers.
    #[arg(long)]
    pub proxy_client_cert_file: Option<String>,
    /// Private key (PEM) of --proxy-client-cert-file.
    #[arg(long)]
    pub proxy_client_key_file: Option<String>,
    /// CA (PEM) that signs front-proxy client certificates: a request
    /// with one is the user its headers name.
    #[arg(long)]
    pub requestheader_client_ca_file: Option<String>,
    /// Comma list of headers holding the user name (`X-Remote-User`).
    #[arg(long)]
    pub requestheader_username_headers: Option<String>,
    /// Comma list of headers holding the groups (`X-Remote-Group`).
    #[arg(long)]
    pub requestheader_group_headers: Option<String>,
    /// Comma list of header prefixes for extra fields (`X-Remote-Extra-`).
    #[arg(long)]
    pub requestheader_extra_headers_prefix: Option<String>,
    /// Comma list of front-proxy certificate CNs allowed (empty: any the
    /// CA signed).
    #[arg(long)]
    pub requestheader_allowed_names: Option<String>,
    /// kube's switch to send aggregated requests to Endpoints instead of
    /// the clusterIP: always on here (there is no kube-proxy), so only
    /// `true` is accepted.
    #[arg(long)]
    pub enable_aggregator_routing: Option<bool>,
}

#[derive(Debug, Default, Clone, Deserialize)]
pub struct Settings {
    pub proxy_client_cert_file: String,
    pub proxy_client_key_file: String,
    pub requestheader_client_ca_file: String,
    pub requestheader_username_headers: String,
    pub requestheader_group_headers: String,
    pub requestheader_extra_headers_prefix: String,
    pub requestheader_allowed_names: String,
}

/// Comma-separated values, trimmed, empty ones dropped.
pub fn list(value: &str) -> Vec<String> {
    let items = value.split(',').map(str::trim).filter(|s| !s.is_empty());
    items.map(str::to_string).collect()
}

impl Settings {
    pub fn load(flags: &AggregatorFlags, file: Option<&Path>) -> Result<Settings, ConfigError> {
        let mut defaults = config::Config::builder();
        for key in KEYS {
            defaults = defaults.set_default(key, "")?;
        }
        let given = [
            flags.proxy_client_cert_file.clone(),
            flags.proxy_client_key_file.clone(),
            flags.requestheader_client_ca_file.clone(),
            flags.requestheader_username_headers.clone(),
            flags.requestheader_group_headers.clone(),
            flags.requestheader_extra_headers_prefix.clone(),
            flags.requestheader_allowed_names.clone(),
        ];
        if flags.enable_aggregator_routing == Some(false) {
            return Err(ConfigError::Invalid {
                field: "enable_aggregator_routing",
                reason: "requests to extension API servers always go to a Service's Endpoints \
                         (there is no kube-proxy to reach its clusterIP); only true is accepted"
                    .into(),
            });
        }
        let overrides: Vec<(&str, Option<String>)> = KEYS.iter().copied().zip(given).collect();
        let settings: Settings =
            capstan_telemetry::settings::load_layered(defaults, file, &overrides)?;
        if settings.proxy_client_cert_file.is_empty() != settings.proxy_client_key_file.is_empty() {
            return Err(ConfigError::Invalid {
                field: "proxy_client_cert_file",
                reason:
                    "--proxy-client-cert-file and --proxy-client-key-file must be given together"
                        .into(),
            });
        }
        Ok(settings)
    }

    /// The front-proxy client identity, if one is configured.
    pub fn client_identity(&self) -> Result<Option<ClientIdentity>, TlsError> {
        if self.proxy_client_cert_file.is_empty() {
            return Ok(None);
        }
        let (cert, key) = (&self.proxy_client_cert_file, &self.proxy_client_key_file);
        ClientIdentity::from_files(cert, key).map(Some)
    }
}

const KEYS: [&str; 7] = [
    "proxy_client_cert_file",
    "proxy_client_key_file",
    "requestheader_client_ca_file",
    "requestheader_username_headers",
    "requestheader_group_headers",
    "requestheader_extra_headers_prefix",
    "requestheader_allowed_names",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_a_client_certificate_and_routing_off_are_refused() {
        let half = AggregatorFlags {
            proxy_client_cert_file: Some("a.crt".into()),
            ..AggregatorFlags::default()
        };
        assert!(Settings::load(&half, None).is_err());
        let off = AggregatorFlags {
            enable_aggregator_routing: Some(false),
            ..AggregatorFlags::default()
        };
        let err = Settings::load(&off, None).unwrap_err().to_string();
        assert!(err.contains("only true is accepted"), "{err}");
        let given = AggregatorFlags {
            requestheader_allowed_names: Some("front-proxy-client".into()),
            enable_aggregator_routing: Some(true),
            ..AggregatorFlags::default()
        };
        let settings = Settings::load(&given, None).unwrap();
        assert_eq!(
            list(&settings.requestheader_allowed_names),
            ["front-proxy-client"]
        );
    }
}
