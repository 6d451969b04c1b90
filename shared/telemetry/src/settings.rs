//! Configuration layering shared by every binary: defaults, then an
//! optional TOML file, then `CAPSTAN_*` environment variables, then flags.

use std::path::Path;

use config::builder::DefaultState;
use config::ConfigBuilder;
use serde::de::DeserializeOwned;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration: {0}")]
    Load(#[from] config::ConfigError),
    #[error("configuration: {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
}

/// Builds a `T` from `defaults`, the optional `file`, the environment and the
/// flags that were given (`None` means the flag was not set).
pub fn load_layered<T: DeserializeOwned>(
    defaults: ConfigBuilder<DefaultState>,
    file: Option<&Path>,
    flags: &[(&str, Option<String>)],
) -> Result<T, ConfigError> {
    let mut builder = defaults;
    if let Some(path) = file {
        builder = builder.add_source(config::File::from(path).required(true));
    }
    builder = builder.add_source(config::Environment::with_prefix("CAPSTAN"));
    for (key, value) in flags {
        if let Some(value) = value {
            builder = builder.set_override(*key, value.as_str())?;
        }
    }
    Ok(builder.build()?.try_deserialize()?)
}
