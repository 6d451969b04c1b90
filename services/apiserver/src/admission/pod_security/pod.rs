//! The pod a check looks at: a Pod's own metadata and spec, or the pod
//! template of a workload (kube's `PodSpecExtractor`), read from the
//! request's JSON, with the helpers every check shares.

use serde_json::Value;

/// A pod's metadata and spec, borrowed from the admitted object.
#[derive(Debug, Clone, Copy)]
pub struct PodView<'a> {
    pub metadata: &'a Value,
    pub spec: &'a Value,
}

/// Where the pod template of each workload type is.
const TEMPLATES: &[(&str, &str, &str)] = &[
    ("", "podtemplates", "/template"),
    ("", "replicationcontrollers", "/spec/template"),
    ("apps", "replicasets", "/spec/template"),
    ("apps", "deployments", "/spec/template"),
    ("apps", "statefulsets", "/spec/template"),
    ("apps", "daemonsets", "/spec/template"),
    ("batch", "jobs", "/spec/template"),
    ("batch", "cronjobs", "/spec/jobTemplate/spec/template"),
];

impl<'a> PodView<'a> {
    /// A Pod's own view.
    pub fn of_pod(pod: &'a Value) -> PodView<'a> {
        PodView {
            metadata: &pod["metadata"],
            spec: &pod["spec"],
        }
    }

    /// The pod template of a workload of `group`/`resource`; none for a
    /// type that has none, or an object without one.
    pub fn of_template(group: &str, resource: &str, object: &'a Value) -> Option<PodView<'a>> {
        let (_, _, path) = TEMPLATES
            .iter()
            .find(|(g, r, _)| *g == group && *r == resource)?;
        let template = object.pointer(path).filter(|t| t.is_object())?;
        Some(PodView {
            metadata: &template["metadata"],
            spec: &template["spec"],
        })
    }

    /// Whether `group`/`resource` is a workload with a pod template.
    pub fn has_template(group: &str, resource: &str) -> bool {
        TEMPLATES
            .iter()
            .any(|(g, r, _)| *g == group && *r == resource)
    }

    /// Every container: init containers, containers, then ephemeral
    /// ones, as kube's `visitContainers` goes.
    pub fn containers(&self) -> impl Iterator<Item = &'a Value> {
        let spec = self.spec;
        ["initContainers", "containers", "ephemeralContainers"]
            .into_iter()
            .flat_map(move |field| spec[field].as_array().into_iter().flatten())
    }

    /// The names of the containers whose securityContext `breaks` a rule.
    pub fn containers_where(&self, breaks: impl Fn(&Value) -> bool) -> Vec<String> {
        self.containers()
            .filter(|c| breaks(security(c)))
            .map(name)
            .collect()
    }

    /// `spec.runtimeClassName`, which an exemption may name.
    pub fn runtime_class(&self) -> Option<&'a str> {
        self.spec["runtimeClassName"].as_str()
    }

    /// The pod's securityContext (Null when unset).
    pub fn security(&self) -> &'a Value {
        &self.spec["securityContext"]
    }

    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        self.metadata["annotations"][key].as_str()
    }

    pub fn annotations(&self) -> impl Iterator<Item = (&'a String, &'a str)> {
        self.metadata["annotations"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k, v.as_str()?)))
    }
}

/// A container's name.
pub fn name(container: &Value) -> String {
    container["name"].as_str().unwrap_or_default().to_string()
}

/// A container's securityContext (Null when unset).
pub fn security(container: &Value) -> &Value {
    &container["securityContext"]
}

/// kube's `pluralize`.
pub fn plural<'s>(singular: &'s str, plural: &'s str, count: usize) -> &'s str {
    match count {
        1 => singular,
        _ => plural,
    }
}

/// kube's `joinQuote`: `"a", "b"`.
pub fn join_quoted<S: AsRef<str>>(items: &[S]) -> String {
    items
        .iter()
        .map(|item| format!("\"{}\"", item.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `container "a"` / `containers "a", "b"`: how details name containers.
pub fn containers_named(names: &[String]) -> String {
    format!(
        "{} {}",
        plural("container", "containers", names.len()),
        join_quoted(names)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn templates_are_found_per_workload_type() {
        let deployment = json!({"spec": {"template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c"}]}}}});
        let view = PodView::of_template("apps", "deployments", &deployment).unwrap();
        assert_eq!(view.containers().count(), 1);
        let cronjob = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {}}}}}});
        assert!(PodView::of_template("batch", "cronjobs", &cronjob).is_some());
        assert!(PodView::of_template("", "configmaps", &deployment).is_none());
        assert!(PodView::of_template("apps", "deployments", &json!({"spec": {}})).is_none());
    }

    #[test]
    fn containers_go_init_then_regular_then_ephemeral() {
        let pod = json!({"spec": {"containers": [{"name": "b"}], "initContainers": [{"name": "a"}],
            "ephemeralContainers": [{"name": "c"}]}});
        let view = PodView::of_pod(&pod);
        let names: Vec<String> = view.containers().map(name).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(containers_named(&names[..1]), "container \"a\"");
        assert_eq!(containers_named(&names), "containers \"a\", \"b\", \"c\"");
    }
}
