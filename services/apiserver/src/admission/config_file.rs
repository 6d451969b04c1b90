//! `--admission-control-config-file`: kube's AdmissionConfiguration
//! (apiserver.config.k8s.io/v1), giving plugins their configuration,
//! inline (`configuration`) or in a file of its own (`path`, relative to
//! the file that names it). Read once at start; a file that cannot be
//! read or understood stops the start with the reason.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::pod_security::config::PodSecurityConfig;

const API_VERSIONS: [&str; 3] = [
    "apiserver.config.k8s.io/v1",
    "apiserver.config.k8s.io/v1alpha1",
    "apiserver.k8s.io/v1alpha1",
];

#[derive(Debug, thiserror::Error)]
pub enum AdmissionConfigError {
    #[error("{0}: {1}")]
    Read(PathBuf, std::io::Error),
    #[error("{0}: {1}")]
    Parse(PathBuf, String),
    #[error("{0}: plugin {1}: {2}")]
    Plugin(PathBuf, String, String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AdmissionConfiguration {
    api_version: String,
    kind: String,
    #[serde(default)]
    plugins: Vec<PluginEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PluginEntry {
    name: String,
    path: Option<String>,
    configuration: Option<Value>,
}

/// How long pods tolerate each taint by default (kube's flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefaultTolerations {
    pub not_ready_seconds: i64,
    pub unreachable_seconds: i64,
}

impl Default for DefaultTolerations {
    fn default() -> Self {
        DefaultTolerations {
            not_ready_seconds: 300,
            unreachable_seconds: 300,
        }
    }
}

/// The plugins' configurations as the flag gave them (none without it).
#[derive(Debug, Clone, Default)]
pub struct PluginConfigurations {
    pub pod_security: PodSecurityConfig,
    /// From kube's `--default-*-toleration-seconds` flags, not the file.
    pub default_tolerations: DefaultTolerations,
}

impl PluginConfigurations {
    /// Reads `file`; an empty name is no file.
    pub fn read(file: &str) -> Result<PluginConfigurations, AdmissionConfigError> {
        if file.is_empty() {
            return Ok(PluginConfigurations::default());
        }
        let file = Path::new(file);
        let mut found = PluginConfigurations::default();
        for (name, configuration) in entries(file)? {
            let bad = |why: String| AdmissionConfigError::Plugin(file.into(), name.clone(), why);
            match name.as_str() {
                "PodSecurity" => {
                    found.pod_security = PodSecurityConfig::parse(&configuration).map_err(bad)?
                }
                // kube ignores configuration for plugins that take none.
                _ => {
                    tracing::info!(plugin = %name, "admission configuration for a plugin that takes none")
                }
            }
        }
        Ok(found)
    }
}

/// Each plugin's configuration document, by name.
fn entries(file: &Path) -> Result<BTreeMap<String, Value>, AdmissionConfigError> {
    let document: AdmissionConfiguration = read_yaml(file)?;
    if !API_VERSIONS.contains(&document.api_version.as_str())
        || document.kind != "AdmissionConfiguration"
    {
        let why = format!(
            "expected apiserver.config.k8s.io/v1 AdmissionConfiguration, got {}/{}",
            document.api_version, document.kind
        );
        return Err(AdmissionConfigError::Parse(file.into(), why));
    }
    let mut found = BTreeMap::new();
    for entry in document.plugins {
        let bad =
            |why: &str| AdmissionConfigError::Plugin(file.into(), entry.name.clone(), why.into());
        let configuration = match (entry.configuration, &entry.path) {
            (Some(inline), None) => inline,
            (None, Some(path)) => {
                let own = file.parent().unwrap_or(Path::new(".")).join(path);
                read_yaml(&own)?
            }
            _ => return Err(bad("exactly one of path or configuration is required")),
        };
        if found.insert(entry.name.clone(), configuration).is_some() {
            return Err(bad("given more than once"));
        }
    }
    Ok(found)
}

fn read_yaml<T: serde::de::DeserializeOwned>(file: &Path) -> Result<T, AdmissionConfigError> {
    let text =
        std::fs::read_to_string(file).map_err(|e| AdmissionConfigError::Read(file.into(), e))?;
    serde_yaml::from_str(&text).map_err(|e| AdmissionConfigError::Parse(file.into(), e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const POD_SECURITY: &str = "apiVersion: pod-security.admission.config.k8s.io/v1\n\
kind: PodSecurityConfiguration\ndefaults: {enforce: baseline}\nexemptions: {namespaces: [kube-system]}\n";

    #[test]
    fn a_plugin_configuration_is_read_inline_or_from_its_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let inline = dir.path().join("inline.yaml");
        let indented = POD_SECURITY.replace('\n', "\n    ");
        std::fs::write(
            &inline,
            format!(
                "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n\
- name: PodSecurity\n  configuration:\n    {indented}"
            ),
        )
        .unwrap();
        std::fs::write(dir.path().join("pss.yaml"), POD_SECURITY).unwrap();
        let by_path = dir.path().join("by-path.yaml");
        std::fs::write(
            &by_path,
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n\
- {name: PodSecurity, path: pss.yaml}\n- {name: EventRateLimit, configuration: {}}\n",
        )
        .unwrap();
        for file in [inline, by_path] {
            let read = PluginConfigurations::read(file.to_str().unwrap()).unwrap();
            assert_eq!(
                read.pod_security.defaults.enforce.to_string(),
                "baseline:latest"
            );
            assert!(read
                .pod_security
                .exemptions
                .namespaces
                .contains("kube-system"));
        }
        assert!(PluginConfigurations::read("")
            .unwrap()
            .pod_security
            .exemptions
            .namespaces
            .is_empty());
    }

    #[test]
    fn a_bad_file_names_itself_and_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bad.yaml");
        let write = |text: &str| std::fs::write(&file, text).unwrap();
        let error = || {
            PluginConfigurations::read(file.to_str().unwrap())
                .unwrap_err()
                .to_string()
        };
        write("apiVersion: v1\nkind: ConfigMap\n");
        assert!(
            error().ends_with(
                "expected apiserver.config.k8s.io/v1 AdmissionConfiguration, got v1/ConfigMap"
            ),
            "{}",
            error()
        );
        write("apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- {name: PodSecurity}\n");
        assert!(
            error()
                .ends_with("plugin PodSecurity: exactly one of path or configuration is required"),
            "{}",
            error()
        );
        write("apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- {name: PodSecurity, path: missing.yaml}\n");
        assert!(
            error().contains("missing.yaml: No such file"),
            "{}",
            error()
        );
        assert!(error().starts_with(dir.path().to_str().unwrap()));
    }
}
