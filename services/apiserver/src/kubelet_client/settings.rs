//! The kubelet client's flags, kube-apiserver's names: the client
//! certificate this server presents to kubelets, the CA their serving
//! certificates are checked with, how long a connection may take, and
//! which of a Node's addresses to use.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::address::AddressType;
use crate::aggregator::tls::ClientIdentity;
use crate::serving::tls::TlsError;
use capstan_telemetry::settings::ConfigError;

/// kube's default order of `--kubelet-preferred-address-types`.
pub const DEFAULT_ADDRESS_TYPES: &str = "Hostname,InternalDNS,InternalIP,ExternalDNS,ExternalIP";

#[derive(Debug, Default, Clone, clap::Args)]
pub struct KubeletFlags {
    /// Client certificate (PEM) presented to kubelets (pods/log, exec...).
    #[arg(long)]
    pub kubelet_client_certificate: Option<String>,
    /// Private key (PEM) of --kubelet-client-certificate.
    #[arg(long)]
    pub kubelet_client_key: Option<String>,
    /// CA (PEM) that signs kubelets' serving certificates; without it
    /// they are not verified (kube's behaviour).
    #[arg(long)]
    pub kubelet_certificate_authority: Option<String>,
    /// How long connecting to a kubelet may take (default 5s).
    #[arg(long)]
    pub kubelet_timeout: Option<String>,
    /// A Node's address types to reach its kubelet at, preferred first.
    #[arg(long)]
    pub kubelet_preferred_address_types: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
pub struct Settings {
    pub kubelet_client_certificate: String,
    pub kubelet_client_key: String,
    pub kubelet_certificate_authority: String,
    #[serde(skip)]
    pub timeout: Duration,
    #[serde(skip)]
    pub preferred_address_types: Vec<AddressType>,
    kubelet_timeout: String,
    kubelet_preferred_address_types: String,
}

const KEYS: [&str; 5] = [
    "kubelet_client_certificate",
    "kubelet_client_key",
    "kubelet_certificate_authority",
    "kubelet_timeout",
    "kubelet_preferred_address_types",
];

impl Settings {
    pub fn load(flags: &KubeletFlags, file: Option<&Path>) -> Result<Settings, ConfigError> {
        let defaults = config::Config::builder()
            .set_default(KEYS[0], "")?
            .set_default(KEYS[1], "")?
            .set_default(KEYS[2], "")?
            .set_default(KEYS[3], "5s")?
            .set_default(KEYS[4], DEFAULT_ADDRESS_TYPES)?;
        let given = [
            flags.kubelet_client_certificate.clone(),
            flags.kubelet_client_key.clone(),
            flags.kubelet_certificate_authority.clone(),
            flags.kubelet_timeout.clone(),
            flags.kubelet_preferred_address_types.clone(),
        ];
        let overrides: Vec<(&str, Option<String>)> = KEYS.iter().copied().zip(given).collect();
        let mut settings: Settings =
            capstan_telemetry::settings::load_layered(defaults, file, &overrides)?;
        settings.timeout = humantime::parse_duration(settings.kubelet_timeout.trim())
            .ok()
            .filter(|t| !t.is_zero())
            .ok_or_else(|| ConfigError::Invalid {
                field: "kubelet_timeout",
                reason: "not a positive duration (such as 5s)".into(),
            })?;
        settings.preferred_address_types = AddressType::parse_list(
            &settings.kubelet_preferred_address_types,
        )
        .map_err(|reason| ConfigError::Invalid {
            field: "kubelet_preferred_address_types",
            reason,
        })?;
        if settings.kubelet_client_certificate.is_empty() != settings.kubelet_client_key.is_empty()
        {
            return Err(ConfigError::Invalid {
                field: "kubelet_client_certificate",
                reason: "--kubelet-client-certificate and --kubelet-client-key must be given \
                         together"
                    .into(),
            });
        }
        Ok(settings)
    }

    /// The client identity presented to kubelets, if one is configured.
    pub fn client_identity(&self) -> Result<Option<ClientIdentity>, TlsError> {
        if self.kubelet_client_certificate.is_empty() {
            return Ok(None);
        }
        let (cert, key) = (&self.kubelet_client_certificate, &self.kubelet_client_key);
        ClientIdentity::from_files(cert, key).map(Some)
    }

    /// The kubelets' CA bundle (PEM), if one is configured.
    pub fn certificate_authority(&self) -> Result<Option<Vec<u8>>, TlsError> {
        if self.kubelet_certificate_authority.is_empty() {
            return Ok(None);
        }
        let path = &self.kubelet_certificate_authority;
        std::fs::read(path).map(Some).map_err(|e| TlsError::File {
            path: path.clone(),
            reason: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_kubes_and_bad_values_are_refused() {
        let settings = Settings::load(&KubeletFlags::default(), None).unwrap();
        assert_eq!(settings.timeout, Duration::from_secs(5));
        assert_eq!(settings.preferred_address_types.len(), 5);
        assert_eq!(settings.preferred_address_types[0], AddressType::Hostname);
        let bad = [
            KubeletFlags {
                kubelet_timeout: Some("soon".into()),
                ..KubeletFlags::default()
            },
            KubeletFlags {
                kubelet_preferred_address_types: Some("InternalIP,Nearby".into()),
                ..KubeletFlags::default()
            },
            KubeletFlags {
                kubelet_client_certificate: Some("a.crt".into()),
                ..KubeletFlags::default()
            },
        ];
        for flags in bad {
            assert!(Settings::load(&flags, None).is_err(), "{flags:?}");
        }
    }
}
