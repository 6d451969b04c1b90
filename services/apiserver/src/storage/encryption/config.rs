//! kube-apiserver's `EncryptionConfiguration` (apiserver.config.k8s.io/v1,
//! YAML or JSON): which resources are encrypted and with which providers,
//! in order. Loading checks everything a start-up must refuse (unknown
//! provider, bad base64, wrong key length, missing keys), so a bad file
//! stops the server before it writes anything.

use std::path::Path;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::Deserialize;

use super::providers::{Cipher, Key};
use super::resources::{Pattern, Rule};
use super::transformer::{Provider, Transformer};

const API_VERSION: &str = "apiserver.config.k8s.io/v1";
const KIND: &str = "EncryptionConfiguration";

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EncryptionConfiguration {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    resources: Vec<ResourceConfiguration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResourceConfiguration {
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    providers: Vec<ProviderConfiguration>,
}

/// One provider: exactly one of the fields is set. An unknown provider
/// name is refused by serde (`deny_unknown_fields`) with the names known.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderConfiguration {
    aescbc: Option<KeysConfiguration>,
    aesgcm: Option<KeysConfiguration>,
    secretbox: Option<KeysConfiguration>,
    identity: Option<serde_yaml::Value>,
    kms: Option<serde_yaml::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysConfiguration {
    #[serde(default)]
    keys: Vec<KeyConfiguration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyConfiguration {
    #[serde(default)]
    name: String,
    #[serde(default)]
    secret: String,
}

/// Why an EncryptionConfiguration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EncryptionError {
    #[error("cannot read it: {0}")]
    Read(#[from] std::io::Error),
    #[error("not an EncryptionConfiguration: {0}")]
    Parse(String),
    #[error("{0}")]
    Invalid(String),
}

/// The rules of the configuration file at `path`.
pub fn load(path: &Path) -> Result<Vec<Rule>, EncryptionError> {
    let text = std::fs::read_to_string(path)?;
    if text.trim().is_empty() {
        return Err(EncryptionError::Invalid("the file is empty".into()));
    }
    parse(&text)
}

/// The rules of a configuration file's text, in the file's order.
pub fn parse(text: &str) -> Result<Vec<Rule>, EncryptionError> {
    // JSON is YAML, so one parser reads both forms.
    let config: EncryptionConfiguration =
        serde_yaml::from_str(text).map_err(|e| EncryptionError::Parse(e.to_string()))?;
    if config.api_version != API_VERSION || config.kind != KIND {
        return Err(invalid(format!(
            "expected apiVersion {API_VERSION} and kind {KIND}, found {:?} and {:?}",
            config.api_version, config.kind
        )));
    }
    if config.resources.is_empty() {
        return Err(invalid("resources: at least one entry is required".into()));
    }
    let mut rules = Vec::new();
    for (i, entry) in config.resources.iter().enumerate() {
        let at = format!("resources[{i}]");
        let transformer = std::sync::Arc::new(transformer(&at, &entry.providers)?);
        if entry.resources.is_empty() {
            return Err(invalid(format!("{at}.resources: at least one is required")));
        }
        for resource in &entry.resources {
            let pattern = Pattern::parse(resource)
                .map_err(|reason| invalid(format!("{at}.resources: {resource:?}: {reason}")))?;
            rules.push(Rule {
                pattern,
                transformer: transformer.clone(),
            });
        }
    }
    Ok(rules)
}

fn invalid(reason: String) -> EncryptionError {
    EncryptionError::Invalid(reason)
}

fn transformer(
    at: &str,
    providers: &[ProviderConfiguration],
) -> Result<Transformer, EncryptionError> {
    if providers.is_empty() {
        return Err(invalid(format!("{at}.providers: at least one is required")));
    }
    let providers = providers
        .iter()
        .enumerate()
        .map(|(j, p)| provider(&format!("{at}.providers[{j}]"), p))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Transformer::new(providers))
}

fn provider(at: &str, config: &ProviderConfiguration) -> Result<Provider, EncryptionError> {
    let set = [
        config.aescbc.is_some(),
        config.aesgcm.is_some(),
        config.secretbox.is_some(),
        config.identity.is_some(),
        config.kms.is_some(),
    ];
    if set.iter().filter(|s| **s).count() != 1 {
        return Err(invalid(format!(
            "{at}: exactly one of aescbc, aesgcm, secretbox, identity, kms must be given"
        )));
    }
    if config.kms.is_some() {
        return Err(invalid(format!(
            "{at}.kms: KMS providers are not supported"
        )));
    }
    let keyed = [
        ("aescbc", &config.aescbc),
        ("aesgcm", &config.aesgcm),
        ("secretbox", &config.secretbox),
    ];
    for (name, keys) in keyed {
        if let Some(keys) = keys {
            let keys = self::keys(&format!("{at}.{name}"), name, keys)?;
            return Ok(Provider::keyed(name, keys));
        }
    }
    Ok(Provider::Identity)
}

fn keys(at: &str, provider: &str, config: &KeysConfiguration) -> Result<Vec<Key>, EncryptionError> {
    if config.keys.is_empty() {
        return Err(invalid(format!("{at}.keys: at least one key is required")));
    }
    let mut keys: Vec<Key> = Vec::new();
    for (k, key) in config.keys.iter().enumerate() {
        let at = format!("{at}.keys[{k}]");
        if key.name.is_empty() || key.name.contains(':') {
            return Err(invalid(format!("{at}.name: required, and without ':'")));
        }
        if keys.iter().any(|known| known.name == key.name) {
            return Err(invalid(format!("{at}.name: {:?} is given twice", key.name)));
        }
        if key.secret.is_empty() {
            return Err(invalid(format!(
                "{at}.secret: key {:?} has no secret",
                key.name
            )));
        }
        let secret = STANDARD.decode(key.secret.trim()).map_err(|e| {
            invalid(format!(
                "{at}.secret: key {:?} is not valid base64: {e}",
                key.name
            ))
        })?;
        let cipher = Cipher::new(provider, &secret)
            .map_err(|reason| invalid(format!("{at}.secret: key {:?}: {reason}", key.name)))?;
        keys.push(Key {
            name: key.name.clone(),
            cipher,
        });
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY32: &str = "c2VjcmV0IGlzIHNlY3VyZSwgb3IgaXMgaXQ/Pz8/Pz8=";

    fn config(providers: &str) -> String {
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n\
             resources:\n- resources: [secrets, widgets.example.com]\n  providers:\n{providers}"
        )
    }

    fn error(text: &str) -> String {
        parse(text).err().expect("refused").to_string()
    }

    #[test]
    fn reads_kube_form_in_yaml_and_json() {
        let yaml = config(&format!(
            "  - aescbc:\n      keys:\n      - name: key1\n        secret: {KEY32}\n  - identity: {{}}\n"
        ));
        let rules = parse(&yaml).unwrap();
        assert_eq!(rules.len(), 2);
        let json = format!(
            r#"{{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration",
            "resources":[{{"resources":["configmaps"],"providers":[{{"secretbox":{{"keys":[{{"name":"k","secret":"{KEY32}"}}]}}}}]}}]}}"#
        );
        assert_eq!(parse(&json).unwrap().len(), 1);
    }

    #[test]
    fn refuses_what_kube_refuses() {
        let unknown = config("  - aesxyz:\n      keys: []\n");
        assert!(error(&unknown).contains("aesxyz"), "{}", error(&unknown));
        let bad_base64 =
            config("  - aescbc:\n      keys:\n      - name: key1\n        secret: '!!!'\n");
        assert!(error(&bad_base64).contains("not valid base64"));
        let short =
            config("  - aesgcm:\n      keys:\n      - name: key1\n        secret: c2hvcnQ=\n");
        assert!(error(&short).contains("16, 24 or 32"), "{}", error(&short));
        let no_keys = config("  - secretbox:\n      keys: []\n");
        assert!(error(&no_keys).contains("at least one key"));
        let no_secret = config("  - aescbc:\n      keys:\n      - name: key1\n");
        assert!(error(&no_secret).contains("has no secret"));
        let two = config(&format!(
            "  - aescbc:\n      keys:\n      - name: a\n        secret: {KEY32}\n    identity: {{}}\n"
        ));
        assert!(error(&two).contains("exactly one"));
        let kind = "apiVersion: v1\nkind: Secret\nresources: []\n";
        assert!(error(kind).contains("EncryptionConfiguration"));
        assert!(error(&config("")).contains("providers"));
    }
}
