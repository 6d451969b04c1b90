//! Content negotiation for responses: plain JSON (or the same as YAML), a
//! meta.k8s.io Table (what `kubectl get` asks for), or
//! PartialObjectMetadata(List).

use actix_web::HttpResponse;
use serde_json::{json, Value};

use super::json_list::JsonList;
use crate::error::ApiError;
use crate::registry::flow::Page;
use crate::registry::Strategy;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Form {
    Json,
    /// The plain object, encoded as YAML (`Accept: application/yaml`).
    Yaml,
    Table,
    Metadata,
}

impl Form {
    /// Picks the first acceptable form of the Accept header, in order.
    pub fn negotiate(accept: Option<&str>) -> Result<Form, ApiError> {
        let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
            return Ok(Form::Json);
        };
        for option in accept.split(',') {
            let lower = option.to_ascii_lowercase().replace(' ', "");
            let media = lower.split(';').next().unwrap_or("");
            if media == "application/yaml" && !lower.contains("as=") {
                return Ok(Form::Yaml);
            }
            if !matches!(media, "application/json" | "*/*" | "application/*") {
                continue;
            }
            if lower.contains("as=table") {
                if lower.contains("g=meta.k8s.io") {
                    return Ok(Form::Table);
                }
                continue;
            }
            if lower.contains("as=partialobjectmetadata") {
                return Ok(Form::Metadata);
            }
            if !lower.contains("as=") {
                return Ok(Form::Json);
            }
        }
        Err(ApiError::NotAcceptable(
            "application/json, application/yaml, application/json;as=Table;v=v1;g=meta.k8s.io"
                .into(),
        ))
    }
}

pub fn partial(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]})
}

fn row(strategy: &dyn Strategy, obj: &Value) -> Value {
    let mut cells = vec![strategy.name_cell(obj)];
    cells.extend(strategy.cells(obj));
    json!({"cells": cells, "object": partial(obj)})
}

/// A Table; `headers` false leaves out columnDefinitions (watch events
/// after the first).
pub fn table(strategy: &dyn Strategy, items: &[Value], metadata: Value, headers: bool) -> Value {
    let mut columns = vec![
        json!({"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0}),
    ];
    columns.extend(strategy.columns().iter().map(|c| c.definition()));
    let mut ordered: Vec<&Value> = items.iter().collect();
    if let Some(order) = strategy.table_order() {
        ordered.sort_by(|a, b| order(a, b));
    }
    let rows: Vec<Value> = ordered.into_iter().map(|o| row(strategy, o)).collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata,
           "columnDefinitions": if headers { Value::Array(columns) } else { json!([]) }, "rows": rows})
}

pub fn object(strategy: &dyn Strategy, form: Form, obj: Value) -> Value {
    match form {
        Form::Json | Form::Yaml => obj,
        Form::Metadata => partial(&obj),
        Form::Table => {
            let metadata = json!({"resourceVersion": obj["metadata"]["resourceVersion"]});
            table(strategy, &[obj], metadata, true)
        }
    }
}

/// A response body: a value built for it, or a JSON list whose items are
/// written straight from the watch cache's shared objects (a list of
/// thousands is not copied first).
pub enum Body {
    Value(Value),
    List(JsonList),
}

pub fn list(strategy: &dyn Strategy, form: Form, page: Page) -> Body {
    let metadata = crate::registry::flow::list_metadata(&page);
    let kind = format!("{}List", strategy.def().kind);
    match form {
        Form::Json => Body::List(JsonList::new(
            &kind,
            &strategy.def().api_version(),
            &metadata,
            page.items,
        )),
        // Only JSON writers take the texts as they are.
        Form::Yaml => {
            let items: Vec<Value> = page.items.iter().map(|o| o.value()).collect();
            Body::Value(
                json!({"kind": kind, "apiVersion": strategy.def().api_version(), "metadata": metadata, "items": items}),
            )
        }
        Form::Table => {
            let items: Vec<Value> = page.items.iter().map(|o| o.value()).collect();
            Body::Value(table(strategy, &items, metadata, true))
        }
        Form::Metadata => {
            let items: Vec<Value> = page.items.iter().map(|o| partial(&o.value())).collect();
            Body::Value(
                json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "items": items}),
            )
        }
    }
}

/// An answer with `body` in `form`, and the Warning headers.
pub fn respond(
    code: u16,
    form: Form,
    body: impl serde::Serialize,
    warnings: &[String],
) -> HttpResponse {
    let status =
        actix_web::http::StatusCode::from_u16(code).unwrap_or(actix_web::http::StatusCode::OK);
    let mut response = HttpResponse::build(status);
    let (content_type, text) = match form {
        Form::Yaml => (
            "application/yaml",
            serde_yaml::to_string(&body).unwrap_or_default(),
        ),
        _ => (
            "application/json",
            serde_json::to_string(&body).unwrap_or_default(),
        ),
    };
    response.content_type(content_type);
    for warning in warnings {
        response.append_header((
            "Warning",
            format!("299 - {}", Value::from(warning.as_str())),
        ));
    }
    response.body(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_accept_headers() {
        let table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(Form::negotiate(Some(table)).unwrap(), Form::Table);
        assert_eq!(
            Form::negotiate(Some("application/vnd.kubernetes.protobuf,application/json")).unwrap(),
            Form::Json
        );
        assert_eq!(
            Form::negotiate(Some(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
            ))
            .unwrap(),
            Form::Metadata
        );
        assert_eq!(Form::negotiate(None).unwrap(), Form::Json);
        assert_eq!(
            Form::negotiate(Some("application/yaml")).unwrap(),
            Form::Yaml
        );
        assert_eq!(
            Form::negotiate(Some("application/vnd.kubernetes.protobuf"))
                .unwrap_err()
                .code(),
            406
        );
    }
}
