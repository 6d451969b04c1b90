//! The in-tree registry: every plugin this scheduler implements.

use crate::framework::Registry;
use crate::plugins;
use crate::preemption::DefaultPreemption;

pub fn in_tree_registry() -> Registry {
    let mut registry = Registry::default();
    plugins::register_all(&mut registry);
    registry.register(DefaultPreemption::NAME, DefaultPreemption::factory);
    registry
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::{parse, ExtensionPoint, SchedulerConfig};
    use crate::framework::{Framework, StaticLister};

    #[test]
    fn the_default_profile_builds_with_kube_s_order_and_weights() {
        let config = SchedulerConfig::default();
        let framework = Framework::new(
            &config.profiles[0],
            &in_tree_registry(),
            Arc::new(StaticLister::default()),
        )
        .unwrap();
        assert_eq!(
            framework.plugin_names(ExtensionPoint::Filter),
            vec![
                "NodeUnschedulable",
                "NodeName",
                "TaintToleration",
                "NodeAffinity",
                "NodePorts",
                "NodeResourcesFit",
                "PodTopologySpread",
                "InterPodAffinity"
            ]
        );
        assert_eq!(
            framework.plugin_names(ExtensionPoint::PostFilter),
            vec!["DefaultPreemption"]
        );
        assert_eq!(
            framework.plugin_names(ExtensionPoint::PreEnqueue),
            vec!["SchedulingGates"]
        );
        let weights: Vec<(&str, i64)> = framework
            .plugin_names(ExtensionPoint::Score)
            .into_iter()
            .map(|name| (name, framework.score_weight(name).unwrap()))
            .collect();
        assert_eq!(
            weights,
            vec![
                ("TaintToleration", 3),
                ("NodeAffinity", 2),
                ("NodeResourcesFit", 1),
                ("PodTopologySpread", 2),
                ("InterPodAffinity", 2),
                ("NodeResourcesBalancedAllocation", 1),
                ("ImageLocality", 1)
            ]
        );
    }

    fn build(yaml: &str) -> Result<Framework, crate::config::FieldError> {
        let text = format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n{yaml}"
        );
        let config = match parse(&text) {
            Ok(config) => config,
            Err(crate::config::ParseError::Field(e)) => return Err(e),
            Err(e) => panic!("{e:?}"),
        };
        Framework::new(
            &config.profiles[0],
            &in_tree_registry(),
            Arc::new(StaticLister::default()),
        )
    }

    #[test]
    fn profiles_reconfigure_points_weights_and_args() {
        let framework = build(
            "profiles:\n- plugins:\n    score:\n      disabled:\n      - name: ImageLocality\n      enabled:\n      - name: NodeAffinity\n        weight: 9\n",
        )
        .unwrap();
        let scores = framework.plugin_names(ExtensionPoint::Score);
        assert_eq!(
            scores[0], "NodeAffinity",
            "re-configured plugins come first"
        );
        assert_eq!(framework.score_weight("NodeAffinity"), Some(9));
        assert!(!scores.contains(&"ImageLocality"));
        assert!(
            framework
                .plugin_names(ExtensionPoint::PreScore)
                .contains(&"ImageLocality"),
            "disabled at score only"
        );
    }

    #[test]
    fn bad_profiles_name_the_field() {
        let cases = [
            ("profiles:\n- plugins:\n    multiPoint:\n      enabled:\n      - name: Bogus\n", "profiles[0].plugins.multiPoint"),
            ("profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: ImageLocality\n", "profiles[0].plugins.filter.enabled[0]"),
            ("profiles:\n- plugins:\n    multiPoint:\n      enabled:\n      - name: VolumeBinding\n", "profiles[0].plugins.multiPoint"),
            (
                "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: Bogus\n",
                "profiles[0].pluginConfig[0].args.scoringStrategy.type",
            ),
            ("profiles:\n- plugins:\n    bind:\n      disabled:\n      - name: '*'\n", "profiles[0].plugins.bind"),
        ];
        for (yaml, field) in cases {
            assert_eq!(
                build(yaml).err().map(|e| e.field),
                Some(field.to_string()),
                "{yaml}"
            );
        }
        assert!(build("profiles:\n- plugins:\n    multiPoint:\n      disabled:\n      - name: VolumeBinding\n").is_ok());
    }
}
