//! What the generic flow works on: a [`Handle`] on one resource type (its
//! strategy, its storage, its key layout) and the shapes of its answers.
//! Every module of the flow (`flow`, `deletion`, `listing`, `claims`,
//! builds on this one, which builds on none of them.

use std::sync::{Arc, RwLock};

use serde_json::Value;

use crate::error::ApiError;
use crate::object::meta::{self, validate_metadata};
use crate::registry::options::{FieldValidation, WriteOptions};
use crate::registry::storage_errors::{self, Reading};
use crate::registry::strategy::Strategy;
use crate::storage::{Interface, Object, StorageError, Stored};

/// Everything a flow needs about one resource type.
#[derive(Clone)]
pub struct Handle {
    pub strategy: Arc<dyn Strategy>,
    pub store: Arc<dyn Interface>,
    /// The storage prefix, `/registry`.
    pub prefix: String,
    /// For the type that holds contents (namespaces) only: every
    /// namespaced type, whose objects in a namespace are deleted when the
    /// namespace goes (empty for the others).
    pub namespace_contents: NamespaceContents,
    /// For types whose objects expire (events): how long they live.
    pub expiry: Option<std::time::Duration>,
    /// The admission plugins every write of the type goes through.
    pub admission: Arc<crate::admission::Chain>,
}

/// A successful write: HTTP code, body, Warning header texts, and the
/// audit annotations admission left for the request's audit event.
#[derive(Debug)]
pub struct Reply {
    pub code: u16,
    pub body: Value,
    pub warnings: Vec<String>,
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// One page of a list.
#[derive(Debug)]
pub struct Page {
    /// Shared with the watch cache when the page comes from there.
    pub items: Vec<Arc<Object>>,
    pub revision: i64,
    pub continue_token: Option<String>,
    pub remaining: Option<i64>,
}

/// Which part of an object a request addresses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Part {
    Main,
    Status,
    Scale,
}

impl Part {
    /// The subresource's name (empty for the object itself).
    pub fn subresource(self) -> &'static str {
        match self {
            Part::Main => "",
            Part::Status => "status",
            Part::Scale => "scale",
        }
    }
}

impl Handle {
    pub(crate) fn def(&self) -> &crate::registry::ResourceDef {
        self.strategy.def()
    }

    pub fn key(&self, namespace: &str, name: &str) -> String {
        match self.def().namespaced {
            true => format!("{}/{}/{namespace}/{name}", self.prefix, self.def().resource),
            false => format!("{}/{}/{name}", self.prefix, self.def().resource),
        }
    }

    /// Keys of a collection: one namespace's, or all of them.
    pub fn collection(&self, namespace: Option<&str>) -> String {
        match namespace.filter(|_| self.def().namespaced) {
            Some(ns) => format!("{}/{}/{ns}/", self.prefix, self.def().resource),
            None => format!("{}/{}/", self.prefix, self.def().resource),
        }
    }

    pub(crate) fn not_found(&self, name: &str) -> ApiError {
        ApiError::NotFound(self.def().target(name))
    }

    pub(crate) fn storage_error(&self, name: &str, err: StorageError) -> ApiError {
        storage_errors::api_error(err, self.def().target(name), Reading::Plain)
    }

    pub(crate) async fn read(&self, namespace: &str, name: &str) -> Result<Stored, ApiError> {
        let found = self
            .store
            .get(&self.key(namespace, name))
            .await
            .map_err(|e| self.storage_error(name, e))?;
        found.ok_or_else(|| self.not_found(name))
    }

    /// Decodes through the typed object and applies `fieldValidation`;
    /// its warnings (unknown fields) go to the request's feedback, so a
    /// refused write sends them too.
    pub(crate) fn decode(&self, body: &Value, options: &WriteOptions) -> Result<Value, ApiError> {
        let def = self.def();
        let decoded = self.strategy.decode(body).map_err(|e| {
            ApiError::BadRequest(format!(
                "{} in version \"{}\" cannot be handled as a {}: {e}",
                def.kind, def.version, def.kind
            ))
        })?;
        let unknown: Vec<String> = decoded
            .unknown_fields
            .iter()
            .map(|f| format!("unknown field {}", go_quoted(f)))
            .collect();
        match options.field_validation {
            FieldValidation::Strict if !unknown.is_empty() => Err(ApiError::BadRequest(format!(
                "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
                def.kind,
                def.version,
                def.kind,
                unknown.join(", ")
            ))),
            FieldValidation::Warn => {
                for warning in unknown {
                    options.feedback.warn(warning);
                }
                Ok(decoded.canonical)
            }
            _ => Ok(decoded.canonical),
        }
    }

    pub(crate) fn check_type(&self, body: &Value) -> Result<(), ApiError> {
        let def = self.def();
        let kind_ok = body["kind"].as_str().is_none_or(|k| k == def.kind);
        let version_ok = body["apiVersion"]
            .as_str()
            .is_none_or(|v| v == def.api_version());
        if !body.is_object() || !kind_ok || !version_ok {
            return Err(ApiError::BadRequest(format!(
                "the body of the request is not a {} of {}: got kind {} apiVersion {}",
                def.kind,
                def.api_version(),
                body["kind"],
                body["apiVersion"]
            )));
        }
        Ok(())
    }

    pub(crate) fn validate(&self, obj: &Value, old: Option<&Value>) -> Result<(), ApiError> {
        let mut causes = validate_metadata(obj, self.def().name_rule);
        causes.extend(match old {
            None => self.strategy.validate(obj),
            Some(old) => self.strategy.validate_update(obj, old),
        });
        if causes.is_empty() {
            return Ok(());
        }
        Err(ApiError::invalid(
            self.def().target(meta::name(obj)),
            self.def().kind,
            causes,
        ))
    }
}

/// The part of `obj` a request addresses.
pub fn render(strategy: &dyn Strategy, obj: Value, part: Part) -> Value {
    match part {
        Part::Scale => strategy.scale_of(&obj).unwrap_or(obj),
        _ => obj,
    }
}

/// Quotes a field name as Go's `%q` does in kube-apiserver's strict decoding
/// errors: control characters become escapes, so the text can go into a
/// `Warning` header (a raw DEL or newline is not a valid header value).
fn go_quoted(name: &str) -> String {
    let mut quoted = String::from("\"");
    for c in name.chars() {
        match c {
            '"' | '\\' => quoted.extend(['\\', c]),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            c if c.is_ascii_control() => quoted.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => quoted.push_str(&format!("\\u{:04x}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// What a namespace holds: every namespaced type, whose objects in a
/// namespace are deleted when the namespace goes. The built-in types are
/// there from the start; a custom type joins while it is served and leaves
/// when its definition goes, so a namespace never outlives its widgets.
#[derive(Clone, Default)]
pub struct NamespaceContents(Arc<RwLock<Vec<Handle>>>);

impl NamespaceContents {
    pub fn new(types: Vec<Handle>) -> NamespaceContents {
        NamespaceContents(Arc::new(RwLock::new(types)))
    }

    /// The types now, to walk without holding the lock across awaits.
    pub fn types(&self) -> Vec<Handle> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Adds `handle`'s type, in place of one with the same group and
    /// resource.
    pub fn serve(&self, handle: Handle) {
        let def = handle.strategy.def();
        let (group, resource) = (def.group, def.resource);
        let mut types = self.0.write().unwrap_or_else(|e| e.into_inner());
        types.retain(|h| !same_type(h, group, resource));
        types.push(handle);
    }

    pub fn withdraw(&self, group: &str, resource: &str) {
        let mut types = self.0.write().unwrap_or_else(|e| e.into_inner());
        types.retain(|h| !same_type(h, group, resource));
    }
}

fn same_type(handle: &Handle, group: &str, resource: &str) -> bool {
    let def = handle.strategy.def();
    def.group == group && def.resource == resource
}
