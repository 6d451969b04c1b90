//! Which webhooks a request goes to (kube's webhook matchers): the rules
//! (operation, group, version, resource and subresource, scope; with
//! matchPolicy Equivalent any version of the resource, since each
//! resource is served at one version here), then the objectSelector on
//! the new or old object, then the namespaceSelector on the labels of the
//! request's namespace, then the matchConditions. The webhook configurations themselves never go
//! to webhooks, so a broken webhook cannot lock them.

use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;
use serde_json::{Map, Value};

use super::super::objects::{Freshness, Objects, NAMESPACES};
use super::super::{AdmissionError, Attributes};
use super::conditions;
use super::hook::{Hook, MUTATING, VALIDATING};
use super::selector;

/// Whether `hook` is called for this request on `object` (none on delete).
pub async fn matches(
    hook: &Hook,
    attributes: &Attributes<'_>,
    object: Option<&Value>,
    objects: &dyn Objects,
) -> Result<bool, AdmissionError> {
    if exempt(attributes) || !rules_match(hook, attributes) {
        return Ok(false);
    }
    let selected = |o: Option<&Value>| selector::matches(hook.object_selector.as_ref(), labels(o));
    let old = attributes.old_object;
    if !(selected(object) || (old.is_some() && selected(old))) {
        return Ok(false);
    }
    if !namespace_matches(hook, attributes, object, objects).await? {
        return Ok(false);
    }
    conditions::allow_call(hook, attributes, object)
}

fn exempt(attributes: &Attributes<'_>) -> bool {
    [MUTATING, VALIDATING]
        .iter()
        .any(|r| r.group == attributes.group && r.resource == attributes.resource)
}

fn labels(object: Option<&Value>) -> Option<&Map<String, Value>> {
    object.and_then(|o| o["metadata"]["labels"].as_object())
}

/// Whether any of the hook's rules covers the request.
pub fn rules_match(hook: &Hook, attributes: &Attributes<'_>) -> bool {
    let exact = hook.exact();
    hook.rules
        .iter()
        .any(|rule| rule_matches(rule, attributes, exact))
}

fn rule_matches(rule: &RuleWithOperations, a: &Attributes<'_>, exact: bool) -> bool {
    let has = |list: &Option<Vec<String>>, value: &str| {
        list.iter().flatten().any(|x| x == "*" || x == value)
    };
    let resources = rule.resources.iter().flatten();
    has(&rule.operations, a.operation.as_str())
        && has(&rule.api_groups, a.group)
        && (!exact || has(&rule.api_versions, a.version))
        && resources
            .into_iter()
            .any(|r| resource_matches(r, a.resource, a.subresource))
        && scope_matches(rule.scope.as_deref().unwrap_or("*"), a)
}

/// `pods` (the object only), `pods/status`, `pods/*` (the object and its
/// subresources, as kube's matcher reads it), `*` (every object, no
/// subresource), `*/status`, `*/*` (everything).
fn resource_matches(pattern: &str, resource: &str, subresource: &str) -> bool {
    let (res, sub) = pattern.split_once('/').unwrap_or((pattern, ""));
    let part = |want: &str, have: &str| want == "*" || want == have;
    part(res, resource) && part(sub, subresource)
}

/// kube counts Namespace objects as cluster-scoped whatever the request's
/// namespace says.
fn scope_matches(scope: &str, a: &Attributes<'_>) -> bool {
    let namespaced = !a.namespace.is_empty() && !is_namespace(a);
    match scope {
        "Cluster" => !namespaced,
        "Namespaced" => namespaced,
        _ => true,
    }
}

fn is_namespace(a: &Attributes<'_>) -> bool {
    a.group.is_empty() && a.resource == "namespaces"
}

/// The namespaceSelector: a Namespace is matched on its own labels, other
/// cluster-scoped objects always match, and a namespaced object on its
/// namespace's labels (from the watch cache; from the store when the
/// cache does not have it yet).
async fn namespace_matches(
    hook: &Hook,
    a: &Attributes<'_>,
    object: Option<&Value>,
    objects: &dyn Objects,
) -> Result<bool, AdmissionError> {
    let wanted = hook.namespace_selector.as_ref();
    if selector::is_everything(wanted) {
        return Ok(true);
    }
    if is_namespace(a) {
        let own = object.or(a.old_object);
        return Ok(selector::matches(wanted, labels(own)));
    }
    if a.namespace.is_empty() {
        return Ok(true);
    }
    let mut found = None;
    for freshness in [Freshness::Cached, Freshness::Current] {
        found = objects.get(NAMESPACES, "", a.namespace, freshness).await?;
        if found.is_some() {
            break;
        }
    }
    match found {
        Some(namespace) => Ok(selector::matches(wanted, labels(Some(&namespace)))),
        None => Err(AdmissionError::NotFound {
            resource: "namespaces".into(),
            name: a.namespace.into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::plugins::testing::Memory;
    use super::super::super::Operation;
    use super::*;
    use crate::auth::UserInfo;
    use serde_json::json;

    fn hook(value: Value) -> Hook {
        let mut base = json!({"name": "h.example.com", "clientConfig": {"url": "https://x/"},
                              "sideEffects": "None", "admissionReviewVersions": ["v1"]});
        base.as_object_mut()
            .unwrap()
            .extend(value.as_object().unwrap().clone());
        serde_json::from_value(base).unwrap()
    }

    fn rule(ops: &[&str], groups: &[&str], versions: &[&str], resources: &[&str]) -> Value {
        json!({"operations": ops, "apiGroups": groups, "apiVersions": versions, "resources": resources})
    }

    fn attributes<'a>(user: &'a UserInfo, resource: &'a str, sub: &'a str) -> Attributes<'a> {
        Attributes {
            operation: Operation::Create,
            old_object: None,
            namespace: "ns",
            name: "a",
            group: "",
            version: "v1",
            resource,
            subresource: sub,
            dry_run: false,
            user,
            feedback: Box::leak(Box::default()),
        }
    }

    #[test]
    fn resources_subresources_and_wildcards() {
        let cases = [
            ("pods", "pods", "", true),
            ("pods", "pods", "status", false),
            ("pods/status", "pods", "status", true),
            ("pods/*", "pods", "status", true),
            ("pods/*", "pods", "", true),
            ("*", "configmaps", "", true),
            ("*", "pods", "status", false),
            ("*/status", "pods", "status", true),
            ("*/status", "pods", "", false),
            ("*/*", "pods", "scale", true),
            ("*/*", "pods", "", true),
            ("services", "pods", "", false),
        ];
        for (pattern, resource, sub, want) in cases {
            assert_eq!(
                resource_matches(pattern, resource, sub),
                want,
                "{pattern} {resource}/{sub}"
            );
        }
    }

    #[test]
    fn operations_groups_versions_and_scope() {
        let user = UserInfo::anonymous();
        let pods = attributes(&user, "pods", "");
        let create = hook(json!({"rules": [rule(&["CREATE"], &[""], &["v1"], &["pods"])]}));
        assert!(rules_match(&create, &pods));
        let update = Attributes {
            operation: Operation::Update,
            ..pods
        };
        assert!(!rules_match(&create, &update));
        let any_op = hook(json!({"rules": [rule(&["*"], &["*"], &["*"], &["*"])]}));
        assert!(rules_match(&any_op, &update));
        let apps = hook(json!({"rules": [rule(&["*"], &["apps"], &["v1"], &["pods"])]}));
        assert!(!rules_match(&apps, &pods));
        // Equivalent: another version of the same resource still matches;
        // Exact does not.
        let beta = rule(&["CREATE"], &[""], &["v1beta1"], &["pods"]);
        assert!(rules_match(&hook(json!({"rules": [beta.clone()]})), &pods));
        let exact = hook(json!({"rules": [beta], "matchPolicy": "Exact"}));
        assert!(!rules_match(&exact, &pods));
        let mut cluster = rule(&["*"], &["*"], &["*"], &["*"]);
        cluster["scope"] = json!("Cluster");
        let cluster = hook(json!({"rules": [cluster]}));
        assert!(!rules_match(&cluster, &pods));
        let nodes = Attributes {
            namespace: "",
            ..attributes(&user, "nodes", "")
        };
        assert!(rules_match(&cluster, &nodes));
        let namespace = Attributes {
            namespace: "ns",
            ..attributes(&user, "namespaces", "")
        };
        assert!(
            rules_match(&cluster, &namespace),
            "a Namespace is cluster-scoped"
        );
    }

    #[tokio::test]
    async fn selectors_on_the_object_its_old_self_and_its_namespace() {
        let user = UserInfo::anonymous();
        let objects = Memory::default();
        objects.put(
            NAMESPACES,
            json!({"metadata": {"name": "ns", "labels": {"hooked": "yes"}}}),
        );
        let all = rule(&["*"], &["*"], &["*"], &["*"]);
        let by_object = hook(
            json!({"rules": [all.clone()], "objectSelector": {"matchLabels": {"app": "web"}}}),
        );
        let web = json!({"metadata": {"labels": {"app": "web"}}});
        let db = json!({"metadata": {"labels": {"app": "db"}}});
        let pods = attributes(&user, "pods", "");
        assert!(matches(&by_object, &pods, Some(&web), &objects)
            .await
            .unwrap());
        assert!(!matches(&by_object, &pods, Some(&db), &objects)
            .await
            .unwrap());
        let was_web = Attributes {
            operation: Operation::Update,
            old_object: Some(&web),
            ..pods
        };
        assert!(matches(&by_object, &was_web, Some(&db), &objects)
            .await
            .unwrap());
        let by_namespace = |value: &str| {
            hook(
                json!({"rules": [all.clone()], "namespaceSelector": {"matchLabels": {"hooked": value}}}),
            )
        };
        assert!(matches(&by_namespace("yes"), &pods, Some(&db), &objects)
            .await
            .unwrap());
        assert!(!matches(&by_namespace("no"), &pods, Some(&db), &objects)
            .await
            .unwrap());
        let missing = Attributes {
            namespace: "gone",
            ..pods
        };
        let err = matches(&by_namespace("yes"), &missing, Some(&db), &objects).await;
        assert!(matches!(err, Err(AdmissionError::NotFound { .. })));
        let config = Attributes {
            group: "admissionregistration.k8s.io",
            resource: "validatingwebhookconfigurations",
            namespace: "",
            ..pods
        };
        assert!(!matches(&by_object, &config, Some(&web), &objects)
            .await
            .unwrap());
    }
}
