//! Query and body options of list, watch, write and delete requests,
//! parsed once at the edge into typed values.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;

use crate::auth::{Authorizer, UserInfo};
use crate::error::ApiError;
use crate::object::selector::{FieldSelector, LabelSelector};

pub type Query = HashMap<String, String>;

pub fn parse_query(query: &str) -> Query {
    actix_web::web::Query::<Vec<(String, String)>>::from_query(query)
        .map(|q| q.into_inner().into_iter().collect())
        .unwrap_or_default()
}

fn flag(query: &Query, key: &str) -> bool {
    matches!(query.get(key).map(String::as_str), Some("true" | "1"))
}

#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub limit: i64,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
    pub watch: bool,
    pub bookmarks: bool,
    pub send_initial_events: bool,
    pub timeout: Option<Duration>,
}

impl ListOptions {
    pub fn parse(query: &Query) -> Result<ListOptions, ApiError> {
        let labels = LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))
            .map_err(|e| ApiError::BadRequest(format!("unable to parse requirement: {}", e.0)))?;
        let fields = FieldSelector::parse(query.get("fieldSelector").map_or("", String::as_str))
            .map_err(|e| ApiError::BadRequest(format!("invalid field selector: {}", e.0)))?;
        let number = |key: &str| -> Result<Option<i64>, ApiError> {
            query
                .get(key)
                .filter(|v| !v.is_empty())
                .map(|v| {
                    v.parse()
                        .map_err(|_| ApiError::BadRequest(format!("{key}: not a number: {v}")))
                })
                .transpose()
        };
        let options = ListOptions {
            labels,
            fields,
            limit: number("limit")?.unwrap_or(0).max(0),
            continue_token: query.get("continue").filter(|c| !c.is_empty()).cloned(),
            resource_version: query
                .get("resourceVersion")
                .filter(|v| !v.is_empty())
                .cloned(),
            resource_version_match: query
                .get("resourceVersionMatch")
                .filter(|v| !v.is_empty())
                .cloned(),
            watch: flag(query, "watch"),
            bookmarks: flag(query, "allowWatchBookmarks"),
            send_initial_events: flag(query, "sendInitialEvents"),
            timeout: number("timeoutSeconds")?.map(|s| Duration::from_secs(s.max(0) as u64)),
        };
        options.check()?;
        Ok(options)
    }

    /// The combinations Kubernetes refuses (422 on ListOptions).
    fn check(&self) -> Result<(), ApiError> {
        let invalid = |field: &str, message: &str| {
            let cause = crate::error::Cause {
                reason: "FieldValueInvalid",
                field: field.into(),
                message: message.into(),
            };
            Err(ApiError::invalid(
                Default::default(),
                "ListOptions",
                vec![cause],
            ))
        };
        if let Some(mode) = &self.resource_version_match {
            if !matches!(mode.as_str(), "NotOlderThan" | "Exact") {
                return invalid("resourceVersionMatch", "must be NotOlderThan or Exact");
            }
            if self.resource_version.is_none() && !self.send_initial_events {
                return invalid(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                );
            }
        }
        if self.send_initial_events
            && (!self.watch || self.resource_version_match.as_deref() != Some("NotOlderThan"))
        {
            return invalid(
                "sendInitialEvents",
                "sendInitialEvents requires watch=true and resourceVersionMatch=NotOlderThan",
            );
        }
        if self.continue_token.is_some()
            && self.resource_version.as_deref().is_some_and(|rv| rv != "0")
        {
            return invalid(
                "resourceVersion",
                "specifying resource version is not allowed when using continue",
            );
        }
        Ok(())
    }

    /// The revision asked for, when it is a specific one (not unset, not "0").
    pub fn revision(&self) -> Result<Option<i64>, ApiError> {
        match self.resource_version.as_deref() {
            None | Some("0") => Ok(None),
            Some(rv) => rv
                .parse()
                .map(Some)
                .map_err(|_| ApiError::BadRequest(format!("invalid resource version: {rv}"))),
        }
    }
}

/// What to do with fields the type does not have.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum FieldValidation {
    Ignore,
    /// The server default: drop them and say so in a Warning header.
    #[default]
    Warn,
    Strict,
}

#[derive(Debug, Clone)]
pub struct WriteOptions {
    pub dry_run: bool,
    pub field_validation: FieldValidation,
    /// The `fieldManager` query parameter, as sent.
    pub field_manager: Option<String>,
    /// The `force` query parameter (apply patches only).
    pub force: Option<bool>,
    /// The User-Agent's product (before the first `/`): the manager of a
    /// write that names none, as kube-apiserver derives it.
    pub agent: String,
    /// Who writes (for admission and the strategies' checks).
    pub user: UserInfo,
    /// What answers for the writer in the strategies' checks (RBAC's
    /// escalation prevention); None for the server's own writes, which
    /// are trusted.
    pub authorizer: Option<std::sync::Arc<dyn Authorizer>>,
    /// Where admission leaves the request's warnings: the route reads it
    /// when the write is refused (a reply carries them otherwise).
    pub feedback: std::sync::Arc<crate::admission::Feedback>,
}

/// No options, and an anonymous writer unless one is named.
impl Default for WriteOptions {
    fn default() -> WriteOptions {
        WriteOptions {
            dry_run: false,
            field_validation: FieldValidation::default(),
            field_manager: None,
            force: None,
            agent: String::new(),
            user: UserInfo::anonymous(),
            authorizer: None,
            feedback: Default::default(),
        }
    }
}

impl WriteOptions {
    /// The options of a write the server makes itself, recorded in
    /// managedFields under `manager`.
    pub fn by(manager: &str) -> WriteOptions {
        WriteOptions {
            field_manager: Some(manager.to_string()),
            user: UserInfo::server(),
            ..Default::default()
        }
    }

    pub fn parse(query: &Query) -> Result<WriteOptions, ApiError> {
        let field_validation = match query.get("fieldValidation").map(String::as_str) {
            None | Some("") | Some("Warn") => FieldValidation::Warn,
            Some("Ignore") => FieldValidation::Ignore,
            Some("Strict") => FieldValidation::Strict,
            Some(other) => {
                return Err(ApiError::BadRequest(format!(
                    "fieldValidation: unsupported value {other:?}: must be Ignore, Warn or Strict"
                )))
            }
        };
        let force = match query.get("force").map(String::as_str) {
            None => None,
            Some("true" | "1") => Some(true),
            Some("false" | "0" | "") => Some(false),
            Some(other) => {
                return Err(ApiError::BadRequest(format!(
                    "force: invalid value {other:?}: must be true or false"
                )))
            }
        };
        Ok(WriteOptions {
            dry_run: dry_run(query)?,
            field_validation,
            field_manager: query.get("fieldManager").filter(|m| !m.is_empty()).cloned(),
            force,
            agent: String::new(),
            user: UserInfo::anonymous(),
            authorizer: None,
            feedback: Default::default(),
        })
    }

    /// The user the handler chain says the request acts as.
    pub fn with_user(mut self, user: UserInfo) -> WriteOptions {
        self.user = user;
        self
    }

    pub fn with_user_agent(mut self, user_agent: Option<&str>) -> WriteOptions {
        let product = user_agent.unwrap_or("").split('/').next().unwrap_or("");
        self.agent = product.chars().take(MAX_FIELD_MANAGER).collect();
        self
    }

    /// Who the write's fields belong to.
    pub fn manager(&self) -> &str {
        self.field_manager.as_deref().unwrap_or(&self.agent)
    }

    /// PatchOptions rules: an apply names its manager; only an apply
    /// may be forced; a manager name is at most 128 characters.
    pub fn check_patch(&self, apply: bool) -> Result<(), ApiError> {
        let cause = |reason, field: &str, message: &str| crate::error::Cause {
            reason,
            field: field.into(),
            message: message.into(),
        };
        let mut causes = Vec::new();
        if apply && self.field_manager.is_none() {
            causes.push(cause(
                "FieldValueRequired",
                "fieldManager",
                "Required value: is required for apply patch",
            ));
        }
        if !apply && self.force.is_some() {
            causes.push(cause(
                "FieldValueForbidden",
                "force",
                "Forbidden: may not be specified for non-apply patch",
            ));
        }
        if self
            .field_manager
            .as_ref()
            .is_some_and(|m| m.chars().count() > MAX_FIELD_MANAGER)
        {
            causes.push(cause(
                "FieldValueTooLong",
                "fieldManager",
                "Too long: may not be more than 128 bytes",
            ));
        }
        if causes.is_empty() {
            return Ok(());
        }
        let target = crate::error::Target {
            group: "meta.k8s.io".into(),
            resource: "PatchOptions".into(),
            name: String::new(),
        };
        Err(ApiError::invalid(
            target,
            "PatchOptions.meta.k8s.io",
            causes,
        ))
    }
}

const MAX_FIELD_MANAGER: usize = 128;

fn dry_run(query: &Query) -> Result<bool, ApiError> {
    match query.get("dryRun").map(String::as_str) {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::BadRequest(format!(
            "dryRun: unsupported value {other:?}: supported values: \"All\""
        ))),
    }
}

#[derive(Debug, Clone)]
pub struct DeleteOptions {
    pub dry_run: bool,
    pub grace_period: Option<i64>,
    pub propagation: Option<String>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// Who deletes (for admission).
    pub user: UserInfo,
    /// As [`WriteOptions::feedback`].
    pub feedback: std::sync::Arc<crate::admission::Feedback>,
}

/// No options, and an anonymous deleter unless one is named.
impl Default for DeleteOptions {
    fn default() -> DeleteOptions {
        DeleteOptions {
            dry_run: false,
            grace_period: None,
            propagation: None,
            uid: None,
            resource_version: None,
            user: UserInfo::anonymous(),
            feedback: Default::default(),
        }
    }
}

impl DeleteOptions {
    /// From the query and an optional DeleteOptions body (kubectl sends
    /// `{"propagationPolicy":"Background"}`).
    pub fn parse(query: &Query, body: Option<&Value>) -> Result<DeleteOptions, ApiError> {
        let empty = Value::Null;
        let body = body.unwrap_or(&empty);
        let body_dry_run = body["dryRun"]
            .as_array()
            .is_some_and(|d| d.iter().any(|v| v == "All"));
        let propagation = body["propagationPolicy"]
            .as_str()
            .map(str::to_string)
            .or_else(|| query.get("propagationPolicy").cloned());
        if let Some(p) = &propagation {
            if !matches!(p.as_str(), "Orphan" | "Background" | "Foreground") {
                return Err(ApiError::BadRequest(format!(
                    "propagationPolicy: unsupported value {p:?}"
                )));
            }
        }
        Ok(DeleteOptions {
            dry_run: body_dry_run || dry_run(query)?,
            grace_period: body["gracePeriodSeconds"]
                .as_i64()
                .or_else(|| query.get("gracePeriodSeconds").and_then(|g| g.parse().ok())),
            propagation,
            uid: body["preconditions"]["uid"].as_str().map(str::to_string),
            resource_version: body["preconditions"]["resourceVersion"]
                .as_str()
                .map(str::to_string),
            user: UserInfo::anonymous(),
            feedback: Default::default(),
        })
    }

    /// The user the handler chain says the request acts as.
    pub fn with_user(mut self, user: UserInfo) -> DeleteOptions {
        self.user = user;
        self
    }
}
