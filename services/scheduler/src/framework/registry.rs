//! Plugin factories by name. A factory reads its plugin's arguments (the
//! profile's `pluginConfig` entry) and may refuse them, naming the field.

use std::collections::HashMap;
use std::sync::Arc;

use super::handle::ClusterLister;
use super::interface::Plugin;

/// An argument error: the path inside `args` and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgsError {
    pub field: String,
    pub message: String,
}

impl ArgsError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> ArgsError {
        ArgsError {
            field: field.into(),
            message: message.into(),
        }
    }

    /// Decodes `args` strictly into `T` (null means all defaults).
    pub fn decode<T: serde::de::DeserializeOwned + Default>(
        args: &serde_json::Value,
    ) -> Result<T, ArgsError> {
        if args.is_null() {
            return Ok(T::default());
        }
        let mut args = args.clone();
        if let Some(object) = args.as_object_mut() {
            // kube's args carry their own apiVersion and kind; they say nothing more.
            object.remove("apiVersion");
            object.remove("kind");
        }
        serde_json::from_value(args)
            .map_err(|e| ArgsError::new("", format!("strict decoding error: {e}")))
    }
}

/// What a factory is given.
pub struct PluginContext<'a> {
    pub args: &'a serde_json::Value,
    pub lister: Arc<dyn ClusterLister>,
}

pub type Factory = fn(&PluginContext) -> Result<Arc<dyn Plugin>, ArgsError>;

#[derive(Default, Clone)]
pub struct Registry {
    factories: HashMap<&'static str, Factory>,
}

impl Registry {
    pub fn register(&mut self, name: &'static str, factory: Factory) {
        self.factories.insert(name, factory);
    }

    pub fn get(&self, name: &str) -> Option<Factory> {
        self.factories.get(name).copied()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.factories.contains_key(name)
    }
}
