//! batch/v1 Job: the selector Kubernetes generates for it, the restart
//! policies its pods may have, and what may not change once it runs.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::batch::v1::Job;
use serde_json::{json, Value};

use crate::error::Cause;
use crate::object::time;
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::cells::label_selector;
use crate::registry::kinds::common::defaults::default_at;
use crate::registry::kinds::common::simple::{simple, Simple};
use crate::registry::kinds::common::validation::{self, check_enum, check_min, immutable};
use crate::registry::kinds::core::workload;
use crate::registry::strategy::{age_cell, Column, AGE};
use crate::registry::subresource::STATUS;

const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";
const JOB_NAME: &str = "batch.kubernetes.io/job-name";
const LEGACY_CONTROLLER_UID: &str = "controller-uid";
const LEGACY_JOB_NAME: &str = "job-name";
pub fn jobs() -> Simple<Job> {
    Simple {
        def: ResourceDef {
            categories: &["all"],
            subresources: &[STATUS],
            ..ResourceDef::new("batch", "v1", "jobs", "Job", "job")
        },
        columns: job_columns,
        cells: job_cells,
        fields: &[("status.successful", "/status/succeeded")],
        validate: validate_job,
        validate_update: job_immutables,
        defaults: job_defaults,
        on_create: prepare_job,
        ..simple(ResourceDef::new("batch", "v1", "jobs", "Job", "job"))
    }
}

fn job_defaults(obj: &mut Value) {
    let spec = &obj["spec"];
    if spec["completions"].is_null() && spec["parallelism"].is_null() {
        default_at(obj, &["spec", "completions"], json!(1));
    }
    default_at(obj, &["spec", "parallelism"], json!(1));
    default_at(obj, &["spec", "backoffLimit"], json!(6));
    default_at(obj, &["spec", "completionMode"], json!("NonIndexed"));
    default_at(obj, &["spec", "suspend"], json!(false));
    let replacement = if obj["spec"]["podFailurePolicy"].is_null() {
        "TerminatingOrFailed"
    } else {
        "Failed"
    };
    default_at(obj, &["spec", "podReplacementPolicy"], json!(replacement));
}

/// Generates the selector unless `manualSelector` is set, resets status,
/// and gives the Job its template's labels when it has none (kube does
/// the latter when defaulting, so it shows the generated labels too).
fn prepare_job(obj: &mut Value) {
    if obj["spec"]["manualSelector"] != Value::Bool(true) {
        generate_selector(obj);
    }
    let own = &obj["metadata"]["labels"];
    if own.as_object().is_none_or(|m| m.is_empty()) {
        let template = obj["spec"]["template"]["metadata"]["labels"].clone();
        if template.as_object().is_some_and(|m| !m.is_empty()) {
            obj["metadata"]["labels"] = template;
        }
    }
    obj["status"] = json!({});
}

fn generate_selector(obj: &mut Value) {
    let name = obj["metadata"]["name"].clone();
    let uid = obj["metadata"]["uid"].clone();
    for (label, value) in [
        (LEGACY_JOB_NAME, &name),
        (JOB_NAME, &name),
        (LEGACY_CONTROLLER_UID, &uid),
        (CONTROLLER_UID, &uid),
    ] {
        default_at(
            obj,
            &["spec", "template", "metadata", "labels", label],
            value.clone(),
        );
    }
    default_at(
        obj,
        &["spec", "selector", "matchLabels", CONTROLLER_UID],
        uid,
    );
}

fn validate_job(obj: &Value) -> Vec<Cause> {
    let mut causes = workload::validate(obj, true);
    causes.extend(job_spec_causes(&obj["spec"], "spec"));
    causes
}

/// What ValidateJobSpec checks that users commonly hit: counts ≥ 0, a
/// known completion mode, and OnFailure or Never restarts.
pub(super) fn job_spec_causes(spec: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    for field in [
        "parallelism",
        "completions",
        "backoffLimit",
        "activeDeadlineSeconds",
        "ttlSecondsAfterFinished",
    ] {
        check_min(
            spec,
            &format!("/{field}"),
            &format!("{path}.{field}"),
            0,
            &mut causes,
        );
    }
    check_enum(
        spec,
        "/completionMode",
        &format!("{path}.completionMode"),
        &["NonIndexed", "Indexed"],
        &mut causes,
    );
    if spec["completionMode"] == "Indexed" && spec["completions"].is_null() {
        causes.push(validation::required(
            format!("{path}.completions"),
            "when completion mode is Indexed",
        ));
    }
    causes.extend(restart_policy_cause(spec, path));
    causes
}

/// A Job's pods may not restart in place: an absent policy defaults to
/// Always, which is refused.
fn restart_policy_cause(spec: &Value, path: &str) -> Option<Cause> {
    let policy = spec["template"]["spec"]["restartPolicy"]
        .as_str()
        .unwrap_or("Always");
    if matches!(policy, "OnFailure" | "Never") {
        return None;
    }
    Some(validation::unsupported(
        format!("{path}.template.spec.restartPolicy"),
        &Value::from(policy),
        &["OnFailure", "Never"],
    ))
}

fn job_immutables(new: &Value, old: &Value) -> Vec<Cause> {
    [
        ("/spec/selector", "spec.selector"),
        ("/spec/template", "spec.template"),
        ("/spec/completions", "spec.completions"),
        ("/spec/completionMode", "spec.completionMode"),
    ]
    .iter()
    .filter_map(|(pointer, field)| immutable(new, old, pointer, field))
    .collect()
}

/// The wide column of a Job's selector (a CronJob's template's too).
pub(super) const SELECTOR: Column = Column::wide(
    "Selector",
    "string",
    "A label query over pods that should match the pod count.",
);

fn job_columns() -> Vec<Column> {
    vec![
        Column::new("Status", "string", "Status of the job."),
        Column::new(
            "Completions",
            "string",
            "The number of pods which reached phase Succeeded.",
        ),
        Column::new("Duration", "string", "Time required to complete the job."),
        AGE,
        workload::CONTAINERS,
        workload::IMAGES,
        SELECTOR,
    ]
}

fn job_cells(obj: &Value) -> Vec<Value> {
    let (containers, images) = workload::containers_and_images(obj);
    vec![
        job_status(obj).into(),
        completions(obj).into(),
        job_duration(obj).into(),
        age_cell(obj),
        containers,
        images,
        label_selector(&obj["spec"]["selector"]).into(),
    ]
}

fn has_condition(obj: &Value, kind: &str) -> bool {
    validation::items(&obj["status"]["conditions"])
        .any(|(_, c)| c["type"] == kind && c["status"] == "True")
}

/// printJob's precedence of conditions.
fn job_status(obj: &Value) -> &'static str {
    if has_condition(obj, "Complete") {
        "Complete"
    } else if has_condition(obj, "Failed") {
        "Failed"
    } else if !obj["metadata"]["deletionTimestamp"].is_null() {
        "Terminating"
    } else if has_condition(obj, "Suspended") {
        "Suspended"
    } else if has_condition(obj, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    }
}

fn completions(obj: &Value) -> String {
    let succeeded = obj["status"]["succeeded"].as_i64().unwrap_or(0);
    if let Some(total) = obj["spec"]["completions"].as_i64() {
        return format!("{succeeded}/{total}");
    }
    match obj["spec"]["parallelism"].as_i64().unwrap_or(0) {
        p if p > 1 => format!("{succeeded}/1 of {p}"),
        _ => format!("{succeeded}/1"),
    }
}

/// Start to completion (or to now while running); empty before it starts.
fn job_duration(obj: &Value) -> String {
    let status = &obj["status"];
    let parse = |t: &Value| t.as_str().and_then(|t| humantime::parse_rfc3339(t).ok());
    let Some(start) = parse(&status["startTime"]) else {
        return String::new();
    };
    let end = parse(&status["completionTime"]).unwrap_or_else(SystemTime::now);
    time::human_duration(end.duration_since(start).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Strategy;

    fn job(restart: Option<&str>) -> Value {
        let mut spec = json!({"containers": [{"name": "pi", "image": "perl:5.34"}]});
        if let Some(policy) = restart {
            spec["restartPolicy"] = policy.into();
        }
        json!({"metadata": {"name": "pi", "uid": "u-1"}, "spec": {"template": {"spec": spec}}})
    }

    fn created(mut obj: Value) -> Value {
        let strategy = jobs();
        strategy.prepare_for_create(&mut obj);
        obj
    }

    #[test]
    fn a_job_gets_a_generated_selector_and_labels() {
        let obj = created(job(Some("Never")));
        assert_eq!(
            obj["spec"]["selector"],
            json!({"matchLabels": {CONTROLLER_UID: "u-1"}})
        );
        let labels = &obj["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels[JOB_NAME], "pi");
        assert_eq!(labels[LEGACY_JOB_NAME], "pi");
        assert_eq!(labels[LEGACY_CONTROLLER_UID], "u-1");
        assert_eq!(obj["metadata"]["labels"], *labels);
        assert_eq!(obj["spec"]["completions"], 1);
        assert_eq!(obj["spec"]["backoffLimit"], 6);
        assert!(
            jobs().validate(&obj).is_empty(),
            "{:?}",
            jobs().validate(&obj)
        );
        assert_eq!(job_cells(&obj)[..2], [json!("Running"), json!("0/1")]);
    }

    #[test]
    fn a_manual_selector_is_left_alone() {
        let mut obj = job(Some("Never"));
        obj["spec"]["manualSelector"] = true.into();
        let obj = created(obj);
        let causes = jobs().validate(&obj);
        assert_eq!(causes[0].field, "spec.selector");
    }

    #[test]
    fn restarts_must_be_on_failure_or_never() {
        for restart in [None, Some("Always")] {
            let causes = jobs().validate(&created(job(restart)));
            assert_eq!(causes.len(), 1, "{causes:?}");
            assert_eq!(causes[0].field, "spec.template.spec.restartPolicy");
            assert_eq!(
                causes[0].message,
                "Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""
            );
        }
    }

    #[test]
    fn selector_template_and_completions_are_immutable() {
        let old = created(job(Some("Never")));
        let mut new = old.clone();
        new["spec"]["completions"] = 3.into();
        new["spec"]["template"]["spec"]["containers"][0]["image"] = "perl:5.36".into();
        let fields: Vec<String> = jobs()
            .validate_update(&new, &old)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(fields, ["spec.template", "spec.completions"]);
    }
}
