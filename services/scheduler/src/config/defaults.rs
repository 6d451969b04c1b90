//! kube's defaults for the configuration, and its merge of a profile's
//! plugin sets into the default ones (a default plugin re-listed keeps its
//! place with the new settings; `disabled: [{name: "*"}]` drops them all).

use super::types::{Plugin, PluginSet, Plugins};

pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";
pub const DEFAULT_PARALLELISM: i32 = 16;
pub const DEFAULT_POD_INITIAL_BACKOFF_SECONDS: i64 = 1;
pub const DEFAULT_POD_MAX_BACKOFF_SECONDS: i64 = 10;
pub const DEFAULT_QPS: f32 = 50.0;
pub const DEFAULT_BURST: i32 = 100;
pub const DEFAULT_LEASE_NAME: &str = "kube-scheduler";
pub const DEFAULT_LEASE_NAMESPACE: &str = "kube-system";

/// The default profile's plugins, with kube's score weights, as MultiPoint.
pub fn default_multi_point() -> Vec<Plugin> {
    let plugin = |name: &str, weight: Option<i32>| Plugin {
        name: name.into(),
        weight,
    };
    vec![
        plugin("SchedulingGates", None),
        plugin("PrioritySort", None),
        plugin("NodeUnschedulable", None),
        plugin("NodeName", None),
        plugin("TaintToleration", Some(3)),
        plugin("NodeAffinity", Some(2)),
        plugin("NodePorts", None),
        plugin("NodeResourcesFit", Some(1)),
        plugin("PodTopologySpread", Some(2)),
        plugin("InterPodAffinity", Some(2)),
        plugin("DefaultPreemption", None),
        plugin("NodeResourcesBalancedAllocation", Some(1)),
        plugin("ImageLocality", Some(1)),
        plugin("DefaultBinder", None),
    ]
}

/// Plugins of kube's default profile that Capstan does not run, since it
/// has no volumes to schedule: a configuration may disable them by name.
pub const VOLUME_PLUGINS: &[&str] = &[
    "VolumeRestrictions",
    "EBSLimits",
    "GCEPDLimits",
    "NodeVolumeLimits",
    "AzureDiskLimits",
    "VolumeBinding",
    "VolumeZone",
];

/// A merged plugin set: the enabled plugins in order, and the names disabled.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MergedSet {
    pub enabled: Vec<Plugin>,
    pub disabled: Vec<String>,
}

impl MergedSet {
    pub fn disables(&self, name: &str) -> bool {
        self.disabled.iter().any(|d| d == name || d == "*")
    }

    pub fn disables_all(&self) -> bool {
        self.disabled.iter().any(|d| d == "*")
    }
}

/// kube's `mergePluginSet`: defaults not disabled, each replaced in place by
/// a custom entry of the same name, then the other custom entries.
pub fn merge_set(defaults: &[Plugin], custom: Option<&PluginSet>) -> MergedSet {
    let custom_enabled: &[Plugin] = custom
        .and_then(|c| c.enabled.as_deref())
        .unwrap_or_default();
    let disabled: Vec<String> = custom
        .and_then(|c| c.disabled.as_ref())
        .into_iter()
        .flatten()
        .map(|p| p.name.clone())
        .collect();
    let mut merged = MergedSet {
        enabled: Vec::new(),
        disabled,
    };
    let mut replaced = vec![false; custom_enabled.len()];
    if !merged.disables_all() {
        for default in defaults {
            if merged.disabled.contains(&default.name) {
                continue;
            }
            match custom_enabled.iter().position(|c| c.name == default.name) {
                Some(i) => {
                    replaced[i] = true;
                    merged.enabled.push(custom_enabled[i].clone());
                }
                None => merged.enabled.push(default.clone()),
            }
        }
    }
    for (i, plugin) in custom_enabled.iter().enumerate() {
        if !replaced[i] {
            merged.enabled.push(plugin.clone());
        }
    }
    merged
}

/// The extension points, in the order kube lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ExtensionPoint {
    PreEnqueue,
    QueueSort,
    PreFilter,
    Filter,
    PostFilter,
    PreScore,
    Score,
    Reserve,
    Permit,
    PreBind,
    Bind,
    PostBind,
}

impl ExtensionPoint {
    pub const ALL: [ExtensionPoint; 12] = [
        ExtensionPoint::PreEnqueue,
        ExtensionPoint::QueueSort,
        ExtensionPoint::PreFilter,
        ExtensionPoint::Filter,
        ExtensionPoint::PostFilter,
        ExtensionPoint::PreScore,
        ExtensionPoint::Score,
        ExtensionPoint::Reserve,
        ExtensionPoint::Permit,
        ExtensionPoint::PreBind,
        ExtensionPoint::Bind,
        ExtensionPoint::PostBind,
    ];

    /// The field name in `plugins`.
    pub fn field(self) -> &'static str {
        match self {
            ExtensionPoint::PreEnqueue => "preEnqueue",
            ExtensionPoint::QueueSort => "queueSort",
            ExtensionPoint::PreFilter => "preFilter",
            ExtensionPoint::Filter => "filter",
            ExtensionPoint::PostFilter => "postFilter",
            ExtensionPoint::PreScore => "preScore",
            ExtensionPoint::Score => "score",
            ExtensionPoint::Reserve => "reserve",
            ExtensionPoint::Permit => "permit",
            ExtensionPoint::PreBind => "preBind",
            ExtensionPoint::Bind => "bind",
            ExtensionPoint::PostBind => "postBind",
        }
    }

    pub fn set_of(self, plugins: &Plugins) -> Option<&PluginSet> {
        match self {
            ExtensionPoint::PreEnqueue => plugins.pre_enqueue.as_ref(),
            ExtensionPoint::QueueSort => plugins.queue_sort.as_ref(),
            ExtensionPoint::PreFilter => plugins.pre_filter.as_ref(),
            ExtensionPoint::Filter => plugins.filter.as_ref(),
            ExtensionPoint::PostFilter => plugins.post_filter.as_ref(),
            ExtensionPoint::PreScore => plugins.pre_score.as_ref(),
            ExtensionPoint::Score => plugins.score.as_ref(),
            ExtensionPoint::Reserve => plugins.reserve.as_ref(),
            ExtensionPoint::Permit => plugins.permit.as_ref(),
            ExtensionPoint::PreBind => plugins.pre_bind.as_ref(),
            ExtensionPoint::Bind => plugins.bind.as_ref(),
            ExtensionPoint::PostBind => plugins.post_bind.as_ref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugin(name: &str, weight: Option<i32>) -> Plugin {
        Plugin {
            name: name.into(),
            weight,
        }
    }

    #[test]
    fn re_listed_default_keeps_its_place_with_new_weight() {
        let defaults = vec![plugin("A", Some(1)), plugin("B", Some(2))];
        let custom = PluginSet {
            enabled: Some(vec![plugin("C", None), plugin("A", Some(5))]),
            disabled: None,
        };
        let merged = merge_set(&defaults, Some(&custom));
        assert_eq!(
            merged.enabled,
            vec![
                plugin("A", Some(5)),
                plugin("B", Some(2)),
                plugin("C", None)
            ]
        );
    }

    #[test]
    fn disabled_defaults_are_dropped_and_star_drops_all() {
        let defaults = vec![plugin("A", None), plugin("B", None)];
        let one = PluginSet {
            enabled: None,
            disabled: Some(vec![plugin("A", None)]),
        };
        assert_eq!(
            merge_set(&defaults, Some(&one)).enabled,
            vec![plugin("B", None)]
        );
        let all = PluginSet {
            enabled: Some(vec![plugin("C", None)]),
            disabled: Some(vec![plugin("*", None)]),
        };
        let merged = merge_set(&defaults, Some(&all));
        assert_eq!(merged.enabled, vec![plugin("C", None)]);
        assert!(merged.disables("A"));
    }
}
