//! A `pods/log` request's PodLogOptions: read from the query, checked as
//! kube checks them (its 422 `PodLogOptions "<pod>" is invalid`), and
//! passed on to the kubelet as kube's `LogLocation` writes them.

use crate::error::{ApiError, Cause, Target};
use crate::registry::options::Query;

/// What a log request asks for.
#[derive(Debug, Default, PartialEq)]
pub struct LogOptions {
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub since_seconds: Option<i64>,
    pub since_time: Option<String>,
    pub tail_lines: Option<i64>,
    pub limit_bytes: Option<i64>,
    pub insecure_skip_tls_verify_backend: bool,
}

pub fn parse(query: &Query, pod: &str) -> Result<LogOptions, ApiError> {
    let flag = |key: &str| -> Result<bool, ApiError> {
        match query.get(key).map(String::as_str) {
            None | Some("" | "false" | "0") => Ok(false),
            Some("true" | "1") => Ok(true),
            Some(other) => Err(ApiError::BadRequest(format!(
                "{key}: {other:?} is not a boolean"
            ))),
        }
    };
    let number = |key: &str| -> Result<Option<i64>, ApiError> {
        let given = query.get(key).filter(|v| !v.is_empty());
        given
            .map(|v| {
                v.parse()
                    .map_err(|_| ApiError::BadRequest(format!("{key}: {v:?} is not an integer")))
            })
            .transpose()
    };
    let since_time = query.get("sinceTime").filter(|t| !t.is_empty()).cloned();
    if let Some(time) = &since_time {
        humantime::parse_rfc3339_weak(time).map_err(|_| {
            ApiError::BadRequest(format!("sinceTime: {time:?} is not an RFC 3339 time"))
        })?;
    }
    let options = LogOptions {
        follow: flag("follow")?,
        previous: flag("previous")?,
        timestamps: flag("timestamps")?,
        since_seconds: number("sinceSeconds")?,
        since_time,
        tail_lines: number("tailLines")?,
        limit_bytes: number("limitBytes")?,
        insecure_skip_tls_verify_backend: flag("insecureSkipTLSVerifyBackend")?,
    };
    let causes = options.invalid();
    if causes.is_empty() {
        return Ok(options);
    }
    let target = Target {
        group: String::new(),
        resource: "pods".into(),
        name: pod.to_string(),
    };
    Err(ApiError::invalid(target, "PodLogOptions", causes))
}

impl LogOptions {
    /// kube's `ValidatePodLogOptions`.
    fn invalid(&self) -> Vec<Cause> {
        let number = |field: &str, value: i64, why: &str| Cause {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: format!("Invalid value: {value}: {why}"),
        };
        let mut causes = Vec::new();
        if let Some(tail) = self.tail_lines.filter(|t| *t < 0) {
            causes.push(number(
                "tailLines",
                tail,
                "must be greater than or equal to 0",
            ));
        }
        if let Some(limit) = self.limit_bytes.filter(|l| *l < 1) {
            causes.push(number("limitBytes", limit, "must be greater than 0"));
        }
        match (self.since_seconds, &self.since_time) {
            (Some(_), Some(_)) => causes.push(Cause::forbidden(
                "",
                "at most one of `sinceTime` or `sinceSeconds` may be specified",
            )),
            (Some(since), None) if since < 1 => {
                causes.push(number("sinceSeconds", since, "must be greater than 0"));
            }
            _ => {}
        }
        causes
    }

    /// The kubelet's query for these options (`?follow=true&...`).
    pub fn kubelet_query(&self) -> String {
        let numbers = [
            ("sinceSeconds", self.since_seconds),
            ("tailLines", self.tail_lines),
            ("limitBytes", self.limit_bytes),
        ]
        .map(|(key, value)| value.map(|v| (key, v.to_string())));
        let mut pairs: Vec<(&str, String)> = [
            ("follow", self.follow),
            ("previous", self.previous),
            ("timestamps", self.timestamps),
        ]
        .into_iter()
        .filter(|(_, on)| *on)
        .map(|(key, _)| (key, "true".to_string()))
        .collect();
        pairs.extend(numbers.into_iter().flatten());
        if let Some(time) = &self.since_time {
            pairs.push(("sinceTime", time.clone()));
        }
        encode(pairs.iter().map(|(k, v)| (*k, v.as_str())))
    }
}

/// `?k=v&...` (empty for no pairs), percent-encoded.
pub fn encode<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.extend_pairs(pairs);
    match query.finish() {
        q if q.is_empty() => q,
        q => format!("?{q}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> Query {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn kubes_checks_refuse_with_its_messages() {
        let cases = [
            (
                vec![("tailLines", "-1")],
                "tailLines: Invalid value: -1: must be greater than or equal to 0",
            ),
            (
                vec![("limitBytes", "0")],
                "limitBytes: Invalid value: 0: must be greater than 0",
            ),
            (
                vec![("sinceSeconds", "0")],
                "sinceSeconds: Invalid value: 0: must be greater than 0",
            ),
            (
                vec![("sinceSeconds", "5"), ("sinceTime", "2024-01-01T00:00:00Z")],
                "at most one of `sinceTime` or `sinceSeconds` may be specified",
            ),
        ];
        for (pairs, message) in cases {
            let err = parse(&query(&pairs), "p").unwrap_err();
            assert_eq!(err.code(), 422, "{pairs:?}");
            let text = err.status()["message"].to_string();
            assert!(text.contains(message), "{text}");
            assert!(
                text.contains("PodLogOptions \\\"p\\\" is invalid"),
                "{text}"
            );
        }
        let err = parse(&query(&[("tailLines", "x")]), "p").unwrap_err();
        assert_eq!(err.code(), 400);
    }

    #[test]
    fn options_pass_to_the_kubelet_as_kube_writes_them() {
        let given = query(&[
            ("follow", "true"),
            ("tailLines", "3"),
            ("container", "c"),
            ("timestamps", "false"),
        ]);
        let options = parse(&given, "p").unwrap();
        assert_eq!(options.kubelet_query(), "?follow=true&tailLines=3");
        assert_eq!(LogOptions::default().kubelet_query(), "");
    }
}
