//! Query and body options of list, watch, write and delete requests,
//! parsed once at the edge into typed values.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;

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

#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    pub dry_run: bool,
    pub field_validation: FieldValidation,
}

impl WriteOptions {
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
        Ok(WriteOptions {
            dry_run: dry_run(query)?,
            field_validation,
        })
    }
}

fn dry_run(query: &Query) -> Result<bool, ApiError> {
    match query.get("dryRun").map(String::as_str) {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::BadRequest(format!(
            "dryRun: unsupported value {other:?}: supported values: \"All\""
        ))),
    }
}

#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub dry_run: bool,
    pub grace_period: Option<i64>,
    pub propagation: Option<String>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
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
        })
    }
}
