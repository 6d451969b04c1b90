//! The encryption variant (`--api-encryption PROVIDER`): every API server
//! encrypts ConfigMaps, the objects the workloads create and read, at rest
//! with PROVIDER (`aescbc`, `aesgcm`, `secretbox`) and a fixed bench key,
//! so creates pay for sealing and the watch cache's fill for opening. The
//! transformer does not depend on the resource: a ConfigMap's cost is a
//! Secret's of the same size.

use std::path::Path;
use std::sync::OnceLock;

static PROVIDER: OnceLock<String> = OnceLock::new();

/// 32 bytes, base64: a key for every provider (AES-256 for the AES ones).
const KEY: &str = "YmVuY2gtb25seSBrZXksIG5vdCBhIHNlY3JldCEhISE=";

/// Turns the variant on for the rest of the run.
pub fn enable(provider: &str) {
    let _ = PROVIDER.set(provider.to_string());
}

/// The API server flags of the variant (none when it is off); writes the
/// EncryptionConfiguration in `dir`.
pub fn flags(dir: &Path) -> std::io::Result<Vec<String>> {
    let Some(provider) = PROVIDER.get() else {
        return Ok(Vec::new());
    };
    let config = dir.join("encryption.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n\
             - resources: [configmaps]\n  providers:\n  - {provider}: {{keys: [{{name: bench, secret: {KEY}}}]}}\n"
        ),
    )?;
    Ok(vec![
        "--encryption-provider-config".into(),
        config.display().to_string(),
    ])
}
