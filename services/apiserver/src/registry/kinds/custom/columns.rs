//! A CRD's `additionalPrinterColumns`: Table columns whose cells are
//! read from the object by kube's JSONPath (`.spec.replicas`).

use jsonpath_rust::JsonPath;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceColumnDefinition;
use serde_json::Value;

use crate::object::time;
use crate::registry::kinds::custom::intern;
use crate::registry::strategy::Column;

pub struct PrinterColumn {
    pub column: Column,
    path: Option<JsonPath>,
}

impl PrinterColumn {
    /// kube's default when a CRD names none: the age.
    pub fn age() -> PrinterColumn {
        PrinterColumn::of(&CustomResourceColumnDefinition {
            name: "Age".into(),
            type_: "date".into(),
            json_path: ".metadata.creationTimestamp".into(),
            ..Default::default()
        })
    }

    pub fn of(def: &CustomResourceColumnDefinition) -> PrinterColumn {
        let description = def
            .description
            .as_deref()
            .unwrap_or("Custom resource definition column (in JSONPath format): ");
        let description = match def.description {
            Some(_) => description.to_string(),
            None => format!("{description}{}", def.json_path),
        };
        let column = Column {
            name: intern::text(&def.name),
            kind: intern::text(&def.type_),
            description: intern::text(&description),
            priority: def.priority.unwrap_or(0).clamp(0, 255) as u8,
        };
        let path = JsonPath::try_from(format!("${}", def.json_path).as_str()).ok();
        PrinterColumn { column, path }
    }

    /// The cell of `obj`: its first match, a date shown as an age, none
    /// as null (kubectl prints `<none>`).
    pub fn cell(&self, obj: &Value) -> Value {
        let Some(path) = &self.path else {
            return Value::Null;
        };
        let found = path.find_slice_ptr(obj);
        let Some(first) = found.first() else {
            return Value::Null;
        };
        let value: &Value = first;
        match (self.column.kind, value) {
            ("date", Value::String(at)) => Value::String(time::age(Some(at))),
            (_, other) => other.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cells_follow_the_json_path() {
        let def = CustomResourceColumnDefinition {
            name: "Ready".into(),
            type_: "string".into(),
            json_path: ".status.conditions[?(@.type=='Ready')].status".into(),
            ..Default::default()
        };
        let column = PrinterColumn::of(&def);
        let obj = json!({"status": {"conditions": [{"type": "Other", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        assert_eq!(column.cell(&obj), json!("True"));
        assert_eq!(column.cell(&json!({})), Value::Null);
        let replicas = PrinterColumn::of(&CustomResourceColumnDefinition {
            name: "Replicas".into(),
            type_: "integer".into(),
            json_path: ".spec.replicas".into(),
            ..Default::default()
        });
        assert_eq!(replicas.cell(&json!({"spec": {"replicas": 3}})), json!(3));
    }
}
