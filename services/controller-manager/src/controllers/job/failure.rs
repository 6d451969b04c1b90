//! How a failed pod counts, kube's podFailurePolicy: the first rule whose
//! exit codes or pod conditions match decides (FailJob, FailIndex, Ignore,
//! Count); no match counts the failure against the backoff limit. And the
//! backoff before a failed pod is replaced: 10 s, doubling, at most 6 min.

use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, PodFailurePolicyRule};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::chrono::{DateTime, Utc};

#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Counts against backoffLimit (or the index's limit).
    Count,
    /// Does not count at all.
    Ignore,
    /// Fails the whole job, with kube's message.
    FailJob(String),
    /// Fails the pod's index (backoffLimitPerIndex).
    FailIndex,
}

/// What the failed `pod` means for `job`.
pub fn judge(job: &Job, pod: &Pod) -> Verdict {
    let rules = job
        .spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref())
        .map(|p| p.rules.as_slice())
        .unwrap_or_default();
    for (index, rule) in rules.iter().enumerate() {
        let Some(matched) = matches(rule, pod) else {
            continue;
        };
        return match rule.action.as_str() {
            "FailJob" => {
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
                let what = match matched {
                    Match::ExitCode(container, code) => {
                        format!("Container {container} for pod {namespace}/{name} failed with exit code {code}")
                    }
                    Match::Condition(kind) => {
                        format!("Pod {namespace}/{name} has condition {kind}")
                    }
                };
                Verdict::FailJob(format!("{what} matching FailJob rule at index {index}"))
            }
            "FailIndex" => Verdict::FailIndex,
            "Ignore" => Verdict::Ignore,
            _ => Verdict::Count,
        };
    }
    Verdict::Count
}

/// What matched a rule.
enum Match {
    ExitCode(String, i32),
    Condition(String),
}

fn matches(rule: &PodFailurePolicyRule, pod: &Pod) -> Option<Match> {
    if let Some(codes) = &rule.on_exit_codes {
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref());
        for status in statuses.into_iter().flatten() {
            if codes
                .container_name
                .as_ref()
                .is_some_and(|c| *c != status.name)
            {
                continue;
            }
            let code = status
                .state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .map(|t| t.exit_code);
            let Some(code) = code.filter(|c| *c != 0) else {
                continue;
            };
            let listed = codes.values.contains(&code);
            if (codes.operator == "In") == listed {
                return Some(Match::ExitCode(status.name.clone(), code));
            }
        }
    }
    for pattern in rule.on_pod_conditions.iter().flatten() {
        let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
        let found = conditions
            .into_iter()
            .flatten()
            .any(|c| c.type_ == pattern.type_ && c.status == pattern.status);
        if found {
            return Some(Match::Condition(pattern.type_.clone()));
        }
    }
    None
}

/// When a pod finished: its containers' last termination, else its
/// Ready condition's last change, else its creation.
pub fn finished_at(pod: &Pod) -> Option<DateTime<Utc>> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    let terminated = statuses
        .into_iter()
        .flatten()
        .filter_map(|s| {
            s.state
                .as_ref()?
                .terminated
                .as_ref()?
                .finished_at
                .as_ref()
                .map(|t| t.0)
        })
        .max();
    terminated.or_else(|| {
        let conditions = pod.status.as_ref()?.conditions.as_ref()?;
        conditions
            .iter()
            .filter_map(|c| c.last_transition_time.as_ref().map(|t| t.0))
            .max()
    })
}

/// kube's pod backoff: 10 s after the first failure, doubling per
/// failure, at most 6 minutes.
pub fn backoff(failures: i32) -> Duration {
    if failures <= 0 {
        return Duration::ZERO;
    }
    let doubled = 10u64.saturating_mul(1u64 << (failures - 1).min(10));
    Duration::from_secs(doubled.min(360))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(rules: serde_json::Value) -> Job {
        serde_json::from_value(json!({"metadata": {"name": "j"}, "spec": {
            "template": {}, "podFailurePolicy": {"rules": rules}}}))
        .unwrap()
    }

    fn failed(code: i32) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"},
            "status": {"phase": "Failed", "containerStatuses": [{"name": "main", "image": "i", "imageID": "",
                "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": code}}}]}})).unwrap()
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let j = job(json!([
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [137]}},
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
        ]));
        assert_eq!(judge(&j, &failed(137)), Verdict::Ignore);
        assert_eq!(
            judge(&j, &failed(42)),
            Verdict::FailJob("Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 1".into())
        );
        assert_eq!(judge(&j, &failed(1)), Verdict::Count);
        let not_in = job(
            json!([{"action": "FailIndex", "onExitCodes": {"operator": "NotIn", "values": [1]}}]),
        );
        assert_eq!(judge(&not_in, &failed(3)), Verdict::FailIndex);
        assert_eq!(judge(&not_in, &failed(1)), Verdict::Count);
    }

    #[test]
    fn backoff_doubles_to_six_minutes() {
        assert_eq!(backoff(0), Duration::ZERO);
        assert_eq!(backoff(1), Duration::from_secs(10));
        assert_eq!(backoff(3), Duration::from_secs(40));
        assert_eq!(backoff(10), Duration::from_secs(360));
    }
}
