//! batch/v1 CronJob: a schedule of five fields (or a `@` descriptor) and
//! a Job template that follows the Job's rules.

use k8s_openapi::api::batch::v1::CronJob;
use serde_json::{json, Value};

use super::jobs::{job_spec_causes, SELECTOR};
use crate::error::Cause;
use crate::object::time;
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::cells::label_selector;
use crate::registry::kinds::common::defaults::default_at;
use crate::registry::kinds::common::simple::{simple, Simple};
use crate::registry::kinds::common::validation::{self, check_enum, check_min};
use crate::registry::kinds::core::pods::strategy::validate_pod_spec;
use crate::registry::kinds::core::workload;
use crate::registry::strategy::{age_cell, Column, AGE};
use crate::registry::subresource::STATUS;

pub fn cron_jobs() -> Simple<CronJob> {
    Simple {
        def: ResourceDef {
            short_names: &["cj"],
            categories: &["all"],
            subresources: &[STATUS],
            ..ResourceDef::new("batch", "v1", "cronjobs", "CronJob", "cronjob")
        },
        columns: cron_columns,
        cells: cron_cells,
        validate: validate_cron_job,
        defaults: cron_defaults,
        on_create: |o| o["status"] = json!({}),
        ..simple(ResourceDef::new(
            "batch", "v1", "cronjobs", "CronJob", "cronjob",
        ))
    }
}

/// SetDefaults_Job: both counts 1 when neither is given.
fn cron_defaults(obj: &mut Value) {
    default_at(obj, &["spec", "concurrencyPolicy"], json!("Allow"));
    default_at(obj, &["spec", "suspend"], json!(false));
    default_at(obj, &["spec", "successfulJobsHistoryLimit"], json!(3));
    default_at(obj, &["spec", "failedJobsHistoryLimit"], json!(1));
}

fn validate_cron_job(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    // Jobs get the name plus an 11-character suffix, and must stay labels.
    if name.len() > 52 {
        causes.push(validation::invalid(
            "metadata.name",
            &Value::from(name),
            "must be no more than 52 characters",
        ));
    }
    let spec = &obj["spec"];
    causes.extend(schedule_cause(spec["schedule"].as_str().unwrap_or("")));
    check_enum(
        spec,
        "/concurrencyPolicy",
        "spec.concurrencyPolicy",
        &["Allow", "Forbid", "Replace"],
        &mut causes,
    );
    for field in [
        "startingDeadlineSeconds",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
    ] {
        check_min(
            spec,
            &format!("/{field}"),
            &format!("spec.{field}"),
            0,
            &mut causes,
        );
    }
    let job = &spec["jobTemplate"]["spec"];
    causes.extend(validate_pod_spec(
        &job["template"]["spec"],
        "spec.jobTemplate.spec.template.spec",
    ));
    causes.extend(job_spec_causes(job, "spec.jobTemplate.spec"));
    causes
}

/// Required, and five fields or a `@` descriptor, as cron.ParseStandard
/// accepts.
fn schedule_cause(schedule: &str) -> Option<Cause> {
    if schedule.trim().is_empty() {
        return Some(Cause::required("spec.schedule"));
    }
    if schedule.starts_with('@') {
        let known = [
            "@yearly",
            "@annually",
            "@monthly",
            "@weekly",
            "@daily",
            "@midnight",
            "@hourly",
        ];
        if known.contains(&schedule) || schedule.starts_with("@every ") {
            return None;
        }
        let why = format!("unrecognized descriptor: {schedule}");
        return Some(validation::invalid(
            "spec.schedule",
            &Value::from(schedule),
            &why,
        ));
    }
    let fields: Vec<&str> = schedule.split_whitespace().collect();
    if fields.len() == 5 {
        return None;
    }
    let why = format!(
        "expected exactly 5 fields, found {}: [{}]",
        fields.len(),
        fields.join(" ")
    );
    Some(validation::invalid(
        "spec.schedule",
        &Value::from(schedule),
        &why,
    ))
}

fn cron_columns() -> Vec<Column> {
    vec![
        Column::new(
            "Schedule",
            "string",
            "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.",
        ),
        Column::new(
            "Timezone",
            "string",
            "The time zone name for the given schedule.",
        ),
        Column::new(
            "Suspend",
            "boolean",
            "This flag tells the controller to suspend subsequent executions.",
        ),
        Column::new(
            "Active",
            "integer",
            "A list of pointers to currently running jobs.",
        ),
        Column::new(
            "Last Schedule",
            "string",
            "Information when was the last time the job was successfully scheduled.",
        ),
        AGE,
        workload::CONTAINERS,
        workload::IMAGES,
        SELECTOR,
    ]
}

fn cron_cells(obj: &Value) -> Vec<Value> {
    let spec = &obj["spec"];
    let job = json!({"spec": spec["jobTemplate"]["spec"]});
    let (containers, images) = workload::containers_and_images(&job);
    let last = match obj["status"]["lastScheduleTime"].as_str() {
        Some(t) => time::age(Some(t)),
        None => "<none>".into(),
    };
    vec![
        spec["schedule"].clone(),
        spec["timeZone"].as_str().unwrap_or("<none>").into(),
        bool_cell(&spec["suspend"]).into(),
        validation::items(&obj["status"]["active"]).count().into(),
        last.into(),
        age_cell(obj),
        containers,
        images,
        label_selector(&job["spec"]["selector"]).into(),
    ]
}

/// printBoolPtr: `<unset>`, `True` or `False`.
fn bool_cell(value: &Value) -> &'static str {
    match value.as_bool() {
        None => "<unset>",
        Some(true) => "True",
        Some(false) => "False",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Strategy;

    #[test]
    fn cron_jobs_need_a_schedule_of_five_fields() {
        let template = json!({"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
            "containers": [{"name": "c", "image": "busybox"}]}}}});
        let cron = |schedule: &str| json!({"metadata": {"name": "backup"}, "spec": {"schedule": schedule, "jobTemplate": template}});
        let strategy = cron_jobs();
        assert!(strategy.validate(&cron("*/5 * * * *")).is_empty());
        assert!(strategy.validate(&cron("@hourly")).is_empty());
        assert_eq!(
            strategy.validate(&cron(""))[0],
            Cause::required("spec.schedule")
        );
        let bad = strategy.validate(&cron("* *"));
        assert_eq!(
            bad[0].message,
            "Invalid value: \"* *\": expected exactly 5 fields, found 2: [* *]"
        );
        let mut obj = cron("0 1 * * *");
        strategy.prepare_for_create(&mut obj);
        let cells = cron_cells(&obj);
        assert_eq!(
            cells[..5],
            [
                json!("0 1 * * *"),
                json!("<none>"),
                json!("False"),
                json!(0),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn cron_job_templates_follow_job_rules() {
        let obj = json!({"metadata": {"name": "b"}, "spec": {"schedule": "@daily",
            "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}}});
        let causes = cron_jobs().validate(&obj);
        assert_eq!(
            causes[0].field,
            "spec.jobTemplate.spec.template.spec.restartPolicy"
        );
    }
}
