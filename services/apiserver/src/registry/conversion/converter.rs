//! What converts objects between the versions of one type.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

/// Why objects could not be converted: kube's words, answered as a 500.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ConversionError(pub String);

/// Converts objects between the versions of one type.
pub trait Converter: Send + Sync {
    /// `objects` (each in any served or stored version) as `api_version`
    /// (`group/version`), in the same order. Objects already in it may
    /// be given back as they are.
    fn convert<'a>(
        &'a self,
        objects: Vec<Value>,
        api_version: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Value>, ConversionError>>;
}

/// How a type served in several versions is stored: the version written,
/// and what converts between versions.
#[derive(Clone)]
pub struct Conversion {
    pub storage_version: &'static str,
    pub converter: Arc<dyn Converter>,
}

/// Kube's `conversion: None`: only `apiVersion` changes.
pub struct Rewrite;

impl Converter for Rewrite {
    fn convert<'a>(
        &'a self,
        mut objects: Vec<Value>,
        api_version: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Value>, ConversionError>> {
        for object in &mut objects {
            object["apiVersion"] = api_version.into();
        }
        Box::pin(async move { Ok(objects) })
    }
}

/// Converts `objects` to `api_version`, calling `converter` only for
/// those in another version (all of them in one call).
pub async fn to_version(
    converter: &dyn Converter,
    mut objects: Vec<Value>,
    api_version: &str,
) -> Result<Vec<Value>, ConversionError> {
    let others: Vec<usize> = (0..objects.len())
        .filter(|i| objects[*i]["apiVersion"] != api_version)
        .collect();
    if others.is_empty() {
        return Ok(objects);
    }
    let batch = others.iter().map(|i| objects[*i].take()).collect();
    let converted = converter.convert(batch, api_version).await?;
    if converted.len() != others.len() {
        return Err(ConversionError(format!(
            "conversion gave {} objects for {}",
            converted.len(),
            others.len()
        )));
    }
    for (i, object) in others.into_iter().zip(converted) {
        if object["apiVersion"] != api_version {
            return Err(ConversionError(format!(
                "conversion gave apiVersion {} instead of {api_version}",
                object["apiVersion"]
            )));
        }
        objects[i] = object;
    }
    Ok(objects)
}
