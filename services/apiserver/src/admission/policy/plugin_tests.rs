//! The ValidatingAdmissionPolicy plugin on in-memory objects: a binding's
//! actions decide what a failed validation does; match constraints,
//! match conditions and failure policies decide whether it runs.

use std::sync::Arc;

use serde_json::{json, Value};

use super::ValidatingAdmissionPolicy;
use crate::admission::objects::{
    VALIDATING_ADMISSION_POLICIES, VALIDATING_ADMISSION_POLICY_BINDINGS,
};
use crate::admission::plugins::testing::{attributes, Memory, CONFIG_MAPS};
use crate::admission::{AdmissionError, Attributes, Operation, Plugin};
use crate::auth::UserInfo;

fn policy(name: &str, spec: Value) -> Value {
    json!({"metadata": {"name": name, "uid": format!("uid-{name}"), "generation": 1}, "spec": spec})
}

fn replicas_policy() -> Value {
    policy(
        "max-replicas",
        json!({
        "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
        "validations": [{"expression": "object.spec.replicas <= 5"}]}),
    )
}

fn binding(name: &str, policy: &str, actions: &[&str]) -> Value {
    json!({"metadata": {"name": name}, "spec": {"policyName": policy, "validationActions": actions}})
}

fn plugin(policies: &[Value], bindings: &[Value]) -> ValidatingAdmissionPolicy {
    let memory = Memory::default();
    for p in policies {
        memory.put(VALIDATING_ADMISSION_POLICIES, p.clone());
    }
    for b in bindings {
        memory.put(VALIDATING_ADMISSION_POLICY_BINDINGS, b.clone());
    }
    ValidatingAdmissionPolicy::new(Arc::new(memory))
}

fn deployment(replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ns"},
        "spec": {"replicas": replicas}})
}

fn create(user: &UserInfo) -> Attributes<'_> {
    let mut a = attributes(Operation::Create, "deployments", "ns", "d", user);
    a.group = "apps";
    a
}

#[tokio::test]
async fn deny_refuses_with_kubes_message_and_reason() {
    let user = UserInfo::anonymous();
    let plugin = plugin(
        &[replicas_policy()],
        &[binding("b", "max-replicas", &["Deny"])],
    );
    let a = create(&user);
    assert_eq!(plugin.validate(&a, Some(&deployment(5))).await, Ok(()));
    assert_eq!(
        plugin.validate(&a, Some(&deployment(6))).await,
        Err(AdmissionError::Refused {
            reason: "Invalid",
            message: "ValidatingAdmissionPolicy 'max-replicas' with binding 'b' denied request: failed expression: object.spec.replicas <= 5".into(),
        })
    );
}

#[tokio::test]
async fn warn_and_audit_let_it_through() {
    let user = UserInfo::anonymous();
    let plugin = plugin(
        &[replicas_policy()],
        &[binding("b", "max-replicas", &["Warn", "Audit"])],
    );
    let a = create(&user);
    assert_eq!(plugin.validate(&a, Some(&deployment(6))).await, Ok(()));
    assert_eq!(
        a.feedback.warnings(),
        ["Validation failed for ValidatingAdmissionPolicy 'max-replicas' with binding 'b': failed expression: object.spec.replicas <= 5"]
    );
    let audit: Value = serde_json::from_str(
        &a.feedback.annotations()["validation.policy.admission.k8s.io/validation_failure"],
    )
    .unwrap();
    assert_eq!(audit[0]["binding"], "b");
    assert_eq!(audit[0]["expressionIndex"], 0);
}

#[tokio::test]
async fn messages_reasons_and_conditions() {
    let user = UserInfo::anonymous();
    let spec = json!({
        "matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}]},
        "matchConditions": [{"name": "only-named-d", "expression": "request.name == 'd'"}],
        "variables": [{"name": "wanted", "expression": "3"}],
        "validations": [{"expression": "object.spec.replicas <= variables.wanted", "reason": "Forbidden",
            "messageExpression": "'at most ' + string(variables.wanted) + ', not ' + string(object.spec.replicas)"}]});
    let plugin = plugin(&[policy("p", spec)], &[binding("b", "p", &["Deny"])]);
    let refused = plugin.validate(&create(&user), Some(&deployment(4))).await;
    assert_eq!(
        refused,
        Err(AdmissionError::Refused {
            reason: "Forbidden",
            message:
                "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: at most 3, not 4"
                    .into()
        })
    );
    let mut other = create(&user);
    other.name = "e";
    assert_eq!(
        plugin.validate(&other, Some(&deployment(4))).await,
        Ok(()),
        "match condition false"
    );
    let configmap = attributes(Operation::Create, "configmaps", "ns", "d", &user);
    let cm = json!({"metadata": {"name": "d"}});
    assert!(
        plugin.validate(&configmap, Some(&cm)).await.is_err(),
        "an error fails closed by default"
    );
}

#[tokio::test]
async fn ignore_skips_errors_and_unmatched_requests_pass() {
    let user = UserInfo::anonymous();
    let mut ignoring = replicas_policy();
    ignoring["spec"]["failurePolicy"] = "Ignore".into();
    ignoring["spec"]["matchConstraints"]["resourceRules"][0]["apiGroups"] = json!(["*"]);
    ignoring["spec"]["matchConstraints"]["resourceRules"][0]["resources"] = json!(["*"]);
    let plugin = plugin(
        &[ignoring],
        &[
            binding("b", "max-replicas", &["Deny"]),
            binding("c", "missing", &["Deny"]),
        ],
    );
    let configmap = attributes(Operation::Create, "configmaps", "ns", "d", &user);
    assert_eq!(
        plugin
            .validate(&configmap, Some(&json!({"metadata": {}})))
            .await,
        Ok(())
    );
    let delete = attributes(Operation::Delete, "deployments", "ns", "d", &user);
    assert_eq!(
        plugin.validate(&delete, None).await,
        Ok(()),
        "DELETE is not in the rule"
    );
}

#[tokio::test]
async fn a_policy_is_compiled_once_per_generation() {
    let user = UserInfo::anonymous();
    let memory = Arc::new(Memory::default());
    memory.put(VALIDATING_ADMISSION_POLICIES, replicas_policy());
    memory.put(
        VALIDATING_ADMISSION_POLICY_BINDINGS,
        binding("b", "max-replicas", &["Deny"]),
    );
    let plugin = ValidatingAdmissionPolicy::new(memory.clone());
    plugin
        .validate(&create(&user), Some(&deployment(1)))
        .await
        .unwrap();
    let first = plugin.compiled(&replicas_policy());
    assert!(
        Arc::ptr_eq(&first, &plugin.compiled(&replicas_policy())),
        "cached"
    );
    let mut changed = replicas_policy();
    changed["metadata"]["generation"] = 2.into();
    changed["spec"]["validations"][0]["expression"] = "object.spec.replicas <= 10".into();
    memory.put(VALIDATING_ADMISSION_POLICIES, changed.clone());
    assert!(
        !Arc::ptr_eq(&first, &plugin.compiled(&changed)),
        "recompiled"
    );
    assert_eq!(
        plugin.validate(&create(&user), Some(&deployment(6))).await,
        Ok(())
    );
}

fn limits(name: &str, max: &str, tier: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "labels": {"tier": tier}},
        "data": {"max": max}})
}

fn param_plugin(bindings: &[Value]) -> (ValidatingAdmissionPolicy, Arc<Memory>) {
    let memory = Arc::new(Memory::default());
    let mut p = replicas_policy();
    p["spec"]["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    p["spec"]["validations"][0]["expression"] =
        "object.spec.replicas <= int(params.data.max)".into();
    memory.put(VALIDATING_ADMISSION_POLICIES, p);
    for b in bindings {
        memory.put(VALIDATING_ADMISSION_POLICY_BINDINGS, b.clone());
    }
    (ValidatingAdmissionPolicy::new(memory.clone()), memory)
}

fn with_ref(name: &str, reference: Value) -> Value {
    let mut b = binding(name, "max-replicas", &["Deny"]);
    b["spec"]["paramRef"] = reference;
    b
}

#[tokio::test]
async fn params_by_name_and_by_selector_each_judge_the_request() {
    let user = UserInfo::anonymous();
    let by_name = with_ref(
        "b",
        json!({"name": "small", "parameterNotFoundAction": "Deny"}),
    );
    let (plugin, memory) = param_plugin(&[by_name]);
    memory.put(CONFIG_MAPS, limits("small", "3", "a"));
    assert_eq!(
        plugin.validate(&create(&user), Some(&deployment(3))).await,
        Ok(())
    );
    let refused = plugin.validate(&create(&user), Some(&deployment(4))).await;
    assert!(
        matches!(refused, Err(AdmissionError::Refused { .. })),
        "{refused:?}"
    );

    let selected = with_ref(
        "b",
        json!({"selector": {"matchLabels": {"tier": "gold"}}, "parameterNotFoundAction": "Allow"}),
    );
    let (plugin, memory) = param_plugin(&[selected]);
    assert_eq!(
        plugin.validate(&create(&user), Some(&deployment(9))).await,
        Ok(()),
        "Allow: no params, nothing to check"
    );
    memory.put(CONFIG_MAPS, limits("loose", "10", "gold"));
    memory.put(CONFIG_MAPS, limits("strict", "5", "gold"));
    memory.put(CONFIG_MAPS, limits("other", "1", "silver"));
    assert_eq!(
        plugin.validate(&create(&user), Some(&deployment(5))).await,
        Ok(())
    );
    assert!(
        plugin
            .validate(&create(&user), Some(&deployment(6)))
            .await
            .is_err(),
        "every selected ConfigMap is applied"
    );
}

#[tokio::test]
async fn missing_params_with_deny_refuse_whatever_the_actions() {
    let user = UserInfo::anonymous();
    let mut warn_only = with_ref(
        "b",
        json!({"name": "absent", "parameterNotFoundAction": "Deny"}),
    );
    warn_only["spec"]["validationActions"] = json!(["Warn"]);
    let (plugin, _) = param_plugin(&[warn_only]);
    assert_eq!(
        plugin.validate(&create(&user), Some(&deployment(1))).await,
        Err(AdmissionError::Refused {
            reason: "Invalid",
            message: "ValidatingAdmissionPolicy 'max-replicas' with binding 'b' denied request: \
                failed to configure binding: no params found for policy binding with `Deny` \
                parameterNotFoundAction"
                .into()
        })
    );
}
