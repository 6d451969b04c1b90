//! PriorityLevelConfiguration: a share of the server's concurrency and
//! how requests wait for it. What the engine could not use is refused
//! here, with the field at fault.

use k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration;
use serde_json::{json, Value};

use super::flowschemas::GROUP;
use crate::error::Cause;
use crate::flowcontrol::bootstrap::EXEMPT;
use crate::flowcontrol::dealer::Dealer;
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::defaults::default_at;
use crate::registry::kinds::common::simple::{def, simple, Simple};
use crate::registry::kinds::common::validation::{invalid, required, text, unsupported};
use crate::registry::strategy::{age_cell, Column, AGE};
use crate::registry::subresource::STATUS;

pub fn strategy() -> Simple<PriorityLevelConfiguration> {
    Simple {
        columns,
        cells,
        validate,
        defaults,
        on_create: |o| o["status"] = json!({}),
        ..simple(ResourceDef {
            namespaced: false,
            subresources: &[STATUS],
            ..def(
                GROUP,
                "prioritylevelconfigurations",
                "PriorityLevelConfiguration",
                "prioritylevelconfiguration",
            )
        })
    }
}

/// kube's v1 defaults: 30 shares and nothing lent for a limited level,
/// 64 queues of 50 dealt in hands of 8 for one that queues.
fn defaults(obj: &mut Value) {
    match obj["spec"]["type"].as_str() {
        Some("Limited") => {
            default_at(
                obj,
                &["spec", "limited", "nominalConcurrencyShares"],
                json!(30),
            );
            default_at(obj, &["spec", "limited", "lendablePercent"], json!(0));
            if obj["spec"]["limited"]["limitResponse"]["type"] == "Queue" {
                let queuing = ["spec", "limited", "limitResponse", "queuing"];
                for (field, value) in [("queues", 64), ("handSize", 8), ("queueLengthLimit", 50)] {
                    let path: Vec<&str> = queuing.iter().copied().chain([field]).collect();
                    default_at(obj, &path, json!(value));
                }
            }
        }
        Some("Exempt") => {
            default_at(
                obj,
                &["spec", "exempt", "nominalConcurrencyShares"],
                json!(0),
            );
            default_at(obj, &["spec", "exempt", "lendablePercent"], json!(0));
        }
        _ => {}
    }
}

fn validate(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &obj["spec"];
    let name = text(obj, "/metadata/name");
    match spec["type"].as_str() {
        Some("Exempt") if name != EXEMPT => {
            let why = "type 'Exempt' is allowed only for the priority level 'exempt'";
            causes.push(invalid("spec.type", &spec["type"], why));
        }
        Some("Exempt") => check_union(spec, "exempt", "limited", &mut causes),
        Some("Limited") if name == EXEMPT => {
            let why = "type 'Limited' is not allowed for the priority level 'exempt'";
            causes.push(invalid("spec.type", &spec["type"], why));
        }
        Some("Limited") => {
            check_union(spec, "limited", "exempt", &mut causes);
            validate_limited(&spec["limited"], &mut causes);
        }
        _ => causes.push(unsupported(
            "spec.type",
            &spec["type"],
            &["Exempt", "Limited"],
        )),
    }
    causes
}

/// Exactly the member the type names is set.
fn check_union(spec: &Value, member: &str, other: &str, causes: &mut Vec<Cause>) {
    if spec[member].is_null() {
        causes.push(required(format!("spec.{member}"), "must not be empty"));
    }
    if !spec[other].is_null() {
        let kind = if other == "exempt" {
            "Exempt"
        } else {
            "Limited"
        };
        let why = format!("must be nil if the type is not {kind}");
        causes.push(Cause::forbidden(format!("spec.{other}"), why));
    }
}

fn validate_limited(limited: &Value, causes: &mut Vec<Cause>) {
    let percent = |field: &str, causes: &mut Vec<Cause>| {
        let value = &limited[field];
        if !value.is_null() && !value.as_i64().is_some_and(|p| (0..=100).contains(&p)) {
            causes.push(invalid(
                format!("spec.limited.{field}"),
                value,
                "must be between 0 and 100, inclusive",
            ));
        }
    };
    percent("lendablePercent", causes);
    let shares = &limited["nominalConcurrencyShares"];
    if !shares
        .as_i64()
        .is_some_and(|s| (0..=i32::MAX as i64).contains(&s))
    {
        causes.push(invalid(
            "spec.limited.nominalConcurrencyShares",
            shares,
            "must be a non-negative integer",
        ));
    }
    let borrowing = &limited["borrowingLimitPercent"];
    if !borrowing.is_null() && borrowing.as_i64().is_none_or(|p| p < 0) {
        causes.push(invalid(
            "spec.limited.borrowingLimitPercent",
            borrowing,
            "if specified, must be a non-negative integer",
        ));
    }
    let response = &limited["limitResponse"];
    match response["type"].as_str() {
        Some("Queue") => validate_queuing(&response["queuing"], causes),
        Some("Reject") if !response["queuing"].is_null() => {
            let why = "must be nil if limited.limitResponse.type is not Limited";
            causes.push(Cause::forbidden("spec.limited.limitResponse.queuing", why));
        }
        Some("Reject") => {}
        _ => causes.push(unsupported(
            "spec.limited.limitResponse.type",
            &response["type"],
            &["Queue", "Reject"],
        )),
    }
}

fn validate_queuing(queuing: &Value, causes: &mut Vec<Cause>) {
    let field = |name: &str| format!("spec.limited.limitResponse.queuing.{name}");
    let positive = |name: &str, causes: &mut Vec<Cause>| {
        let value = &queuing[name];
        let good = value
            .as_i64()
            .is_some_and(|v| (1..=i32::MAX as i64).contains(&v));
        if !good {
            causes.push(invalid(field(name), value, "must be positive"));
        }
        good.then(|| value.as_i64().unwrap_or(0) as u32)
    };
    let queues = positive("queues", causes);
    let hand = positive("handSize", causes);
    positive("queueLengthLimit", causes);
    if let (Some(queues), Some(hand)) = (queues, hand) {
        if let Err(err) = Dealer::new(queues, hand) {
            causes.push(invalid(
                field("handSize"),
                &queuing["handSize"],
                &err.to_string(),
            ));
        }
    }
}

fn columns() -> Vec<Column> {
    vec![
        Column::new("Type", "string", "Whether the level is limited or exempt."),
        Column::new(
            "NominalConcurrencyShares",
            "string",
            "The level's share of the server's concurrency.",
        ),
        Column::new("Queues", "string", "How many queues the level has."),
        Column::new("HandSize", "string", "How many queues each flow is dealt."),
        Column::new(
            "QueueLengthLimit",
            "string",
            "How many requests may wait in a queue.",
        ),
        AGE,
    ]
}

fn cells(obj: &Value) -> Vec<Value> {
    let spec = &obj["spec"];
    let shown = |value: &Value| match value {
        Value::Null => json!("<none>"),
        other => json!(other.to_string().trim_matches('"')),
    };
    let queuing = &spec["limited"]["limitResponse"]["queuing"];
    vec![
        spec["type"].clone(),
        shown(&spec["limited"]["nominalConcurrencyShares"]),
        shown(&queuing["queues"]),
        shown(&queuing["handSize"]),
        shown(&queuing["queueLengthLimit"]),
        age_cell(obj),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Strategy;

    fn level(name: &str, spec: Value) -> Value {
        json!({"metadata": {"name": name}, "spec": spec})
    }

    #[test]
    fn a_limited_level_is_defaulted_and_checked() {
        let strategy = strategy();
        let mut obj = level(
            "team",
            json!({"type": "Limited", "limited": {"limitResponse": {"type": "Queue"}}}),
        );
        strategy.prepare_for_create(&mut obj);
        let queuing = &obj["spec"]["limited"]["limitResponse"]["queuing"];
        assert_eq!(
            (queuing["queues"].clone(), queuing["handSize"].clone()),
            (json!(64), json!(8))
        );
        assert_eq!(obj["spec"]["limited"]["nominalConcurrencyShares"], 30);
        assert!(
            strategy.validate(&obj).is_empty(),
            "{:?}",
            strategy.validate(&obj)
        );
        obj["spec"]["limited"]["limitResponse"]["queuing"]["queues"] = json!(1 << 20);
        obj["spec"]["limited"]["limitResponse"]["queuing"]["handSize"] = json!(10);
        obj["spec"]["limited"]["lendablePercent"] = json!(101);
        let fields: Vec<String> = strategy
            .validate(&obj)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            [
                "spec.limited.lendablePercent",
                "spec.limited.limitResponse.queuing.handSize"
            ]
        );
    }

    #[test]
    fn only_the_exempt_level_is_exempt() {
        let exempt = json!({"type": "Exempt", "exempt": {}});
        assert!(validate(&level("exempt", exempt.clone())).is_empty());
        assert_eq!(validate(&level("mine", exempt))[0].field, "spec.type");
        let limited = json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 1, "limitResponse": {"type": "Reject"}}, "exempt": {}});
        let fields: Vec<String> = validate(&level("mine", limited))
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(fields, ["spec.exempt"]);
        assert_eq!(
            validate(&level("x", json!({"type": "Other"})))[0].field,
            "spec.type"
        );
    }

    #[test]
    fn the_table_reads_as_kubectl_shows_it() {
        let catch_all = level(
            "catch-all",
            json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "limitResponse": {"type": "Reject"}}}),
        );
        assert_eq!(
            cells(&catch_all)[..5],
            [
                json!("Limited"),
                json!("5"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        let exempt = level("exempt", json!({"type": "Exempt", "exempt": {}}));
        assert_eq!(cells(&exempt)[1], "<none>");
    }
}
