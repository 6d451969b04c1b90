//! An audit log for process tests that look at what a request left in
//! it: the API server's flags for a policy recording one core resource,
//! and the wait for a create's event once it is written.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::poll::wait_for;

/// `--audit-policy-file` and `--audit-log-path` under `dir`, for a policy
/// that records the core `resource` at Request level (so a create's
/// event names its object) and nothing else.
pub fn flags_recording(dir: &Path, resource: &str) -> Vec<String> {
    let policy = dir.join("audit-policy.yaml");
    let rules = format!(
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n\
- level: Request\n  resources: [{{group: \"\", resources: [{resource}]}}]\n- level: None\n"
    );
    std::fs::write(&policy, rules).expect("write the audit policy");
    let log = dir.join("audit.log");
    [
        "--audit-policy-file",
        policy.to_str().expect("UTF-8"),
        "--audit-log-path",
        log.to_str().expect("UTF-8"),
    ]
    .map(String::from)
    .to_vec()
}

/// The ResponseComplete event of creating the object `name`, once the
/// log under `dir` holds it.
pub fn create_event(dir: &Path, name: &str) -> Value {
    let wait = Duration::from_secs(30);
    wait_for(wait, &format!("the audit event of creating {name}"), || {
        let text = std::fs::read_to_string(dir.join("audit.log")).unwrap_or_default();
        text.lines()
            .map(|line| serde_json::from_str::<Value>(line).expect("JSON lines"))
            .find(|e| {
                e["verb"] == "create"
                    && e["objectRef"]["name"] == name
                    && e["stage"] == "ResponseComplete"
            })
    })
}
