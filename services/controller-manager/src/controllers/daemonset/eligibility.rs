//! Which nodes a DaemonSet's pod belongs on (kube's
//! `NodeShouldRunDaemonPod`): the template's nodeName, nodeSelector and
//! required node affinity must match the node, and its taints must be
//! tolerated, counting the tolerations kube adds to every daemon pod. An
//! untolerated NoSchedule taint keeps a new pod off but lets a running one
//! stay; an untolerated NoExecute taint sends it away too. The pods are
//! placed by the scheduler, through a required node affinity on the
//! node's `metadata.name`.

use capstan_component_helpers::node_affinity;
use capstan_component_helpers::tolerations::tolerates;
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    PodSpec, PodTemplateSpec, Toleration,
};

/// Whether a pod should be made on the node, and whether one there may stay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fit {
    pub should_run: bool,
    pub should_continue_running: bool,
}

/// The tolerations kube adds to daemon pods: they run on nodes that are
/// not ready, unreachable, under pressure or cordoned; host-network pods
/// on nodes whose network is not set up too.
pub fn with_daemon_tolerations(spec: &mut PodSpec) {
    let mut added = vec![
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ];
    if spec.host_network == Some(true) {
        added.push(("node.kubernetes.io/network-unavailable", "NoSchedule"));
    }
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for (key, effect) in added {
        let present = tolerations
            .iter()
            .any(|t| t.key.as_deref() == Some(key) && t.effect.as_deref() == Some(effect));
        if !present {
            tolerations.push(Toleration {
                key: Some(key.into()),
                operator: Some("Exists".into()),
                effect: Some(effect.into()),
                ..Toleration::default()
            });
        }
    }
}

/// The template with kube's daemon tolerations.
pub fn daemon_template(template: &PodTemplateSpec) -> PodTemplateSpec {
    let mut template = template.clone();
    with_daemon_tolerations(template.spec.get_or_insert_with(PodSpec::default));
    template
}

/// Pins `spec` to `node` through a required node affinity on the node's
/// name (replacing other required terms: the node was checked against them).
pub fn pin_to_node(spec: &mut PodSpec, node: &str) {
    let term = NodeSelectorTerm {
        match_fields: Some(vec![NodeSelectorRequirement {
            key: "metadata.name".into(),
            operator: "In".into(),
            values: Some(vec![node.into()]),
        }]),
        match_expressions: None,
    };
    let affinity = spec.affinity.get_or_insert_with(Affinity::default);
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    node_affinity.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: vec![term],
    });
}

/// The node a daemon pod is on, or pinned to before it is scheduled.
pub fn target_node(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(node) = spec.node_name.as_ref().filter(|n| !n.is_empty()) {
        return Some(node.clone());
    }
    let required = spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?;
    let fields = required
        .node_selector_terms
        .first()?
        .match_fields
        .as_ref()?;
    let pin = fields
        .iter()
        .find(|f| f.key == "metadata.name" && f.operator == "In")?;
    match pin.values.as_deref() {
        Some([node]) => Some(node.clone()),
        _ => None,
    }
}

/// Whether `template`'s pods belong on `node`.
pub fn fit(node: &Node, template: &PodTemplateSpec) -> Fit {
    let nowhere = Fit {
        should_run: false,
        should_continue_running: false,
    };
    let Some(spec) = template.spec.as_ref() else {
        return nowhere;
    };
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let named_elsewhere = spec
        .node_name
        .as_deref()
        .is_some_and(|n| !n.is_empty() && n != name);
    if named_elsewhere || !node_affinity::matches(spec, name, &labels) {
        return nowhere;
    }
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let tolerations = spec.tolerations.clone().unwrap_or_default();
    let untolerated = |effects: &[&str]| {
        taints
            .iter()
            .filter(|t| effects.contains(&t.effect.as_str()))
            .any(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
    };
    Fit {
        should_run: !untolerated(&["NoSchedule", "NoExecute"]),
        should_continue_running: !untolerated(&["NoExecute"]),
    }
}
