//! The order a cycle walks the nodes in: zones interleaved round-robin (kube's
//! node tree), so that a search that stops early still sees every zone.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Node;

use crate::model::labels_of;

const REGION: &str = "topology.kubernetes.io/region";
const ZONE: &str = "topology.kubernetes.io/zone";

#[derive(Debug, Default, Clone)]
pub struct NodeTree {
    /// Zones in the order they were first seen.
    zones: Vec<String>,
    by_zone: HashMap<String, Vec<String>>,
    zone_of: HashMap<String, String>,
}

fn zone_key(node: &Node) -> String {
    let labels = labels_of(&node.metadata.labels);
    let region = labels.get(REGION).map(String::as_str).unwrap_or_default();
    let zone = labels.get(ZONE).map(String::as_str).unwrap_or_default();
    if region.is_empty() && zone.is_empty() {
        return String::new();
    }
    format!("{region}:\x00:{zone}")
}

impl NodeTree {
    pub fn add(&mut self, node: &Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let zone = zone_key(node);
        if self.zone_of.get(&name) == Some(&zone) {
            return;
        }
        self.remove(&name);
        if !self.by_zone.contains_key(&zone) {
            self.zones.push(zone.clone());
        }
        self.by_zone
            .entry(zone.clone())
            .or_default()
            .push(name.clone());
        self.zone_of.insert(name, zone);
    }

    pub fn remove(&mut self, name: &str) {
        let Some(zone) = self.zone_of.remove(name) else {
            return;
        };
        if let Some(names) = self.by_zone.get_mut(&zone) {
            names.retain(|n| n != name);
            if names.is_empty() {
                self.by_zone.remove(&zone);
                self.zones.retain(|z| *z != zone);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.zone_of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.zone_of.is_empty()
    }

    /// All node names, zones interleaved: the first of each zone, then the second...
    pub fn list(&self) -> Vec<String> {
        let mut out = Vec::with_capacity(self.len());
        let mut index = 0;
        while out.len() < self.len() {
            for zone in &self.zones {
                if let Some(name) = self.by_zone[zone].get(index) {
                    out.push(name.clone());
                }
            }
            index += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testing::NodeBuilder;

    #[test]
    fn zones_are_interleaved() {
        let mut tree = NodeTree::default();
        for (name, zone) in [
            ("a1", "a"),
            ("a2", "a"),
            ("a3", "a"),
            ("b1", "b"),
            ("c1", "c"),
            ("b2", "b"),
        ] {
            tree.add(&NodeBuilder::new(name).label(ZONE, zone).build());
        }
        assert_eq!(tree.list(), vec!["a1", "b1", "c1", "a2", "b2", "a3"]);
        tree.remove("b1");
        tree.add(&NodeBuilder::new("a3").label(ZONE, "c").build());
        assert_eq!(tree.list(), vec!["a1", "b2", "c1", "a2", "a3"]);
    }
}
