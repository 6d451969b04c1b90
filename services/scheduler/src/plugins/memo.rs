//! Per-node results remembered across cycles. Counting the pods a selector
//! matches on every node is the cost of PodTopologySpread and
//! InterPodAffinity; consecutive pods of one workload ask the same question,
//! and between two cycles only the nodes whose generation moved (the one
//! that took the last pod, a binding confirmed) hold different pods. So a
//! result is kept per question (`signature`) and node, with the node's
//! generation, and recomputed only when that changed.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::model::NodeInfo;

/// Questions remembered at most; past that the memo starts over.
const MAX_SIGNATURES: usize = 128;

/// Per node name: the generation the answer was computed at, and the answer.
type PerNode<V> = foldhash::HashMap<String, (u64, V)>;

pub struct NodeMemo<V> {
    by_signature: Mutex<HashMap<String, PerNode<V>>>,
}

impl<V> Default for NodeMemo<V> {
    fn default() -> Self {
        NodeMemo {
            by_signature: Mutex::new(HashMap::new()),
        }
    }
}

impl<V> NodeMemo<V> {
    /// For each of `nodes`: `compute`'s answer for it (remembered, or
    /// computed now if the node changed), handed to `visit`.
    pub fn visit<'a>(
        &self,
        signature: &str,
        nodes: impl Iterator<Item = &'a Arc<NodeInfo>>,
        compute: impl Fn(&NodeInfo) -> V,
        mut visit: impl FnMut(&NodeInfo, &V),
    ) {
        let mut all = self.by_signature.lock();
        if !all.contains_key(signature) && all.len() >= MAX_SIGNATURES {
            all.clear();
        }
        let memo = all.entry(signature.to_string()).or_default();
        for node in nodes {
            match memo.get_mut(node.name.as_str()) {
                Some(entry) => {
                    if entry.0 != node.generation {
                        *entry = (node.generation, compute(node));
                    }
                    visit(node, &entry.1);
                }
                None => {
                    let value = compute(node);
                    visit(node, &value);
                    memo.insert(node.name.clone(), (node.generation, value));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testing::{NodeBuilder, PodBuilder};
    use std::cell::Cell;

    #[test]
    fn recomputes_only_changed_nodes() {
        let memo = NodeMemo::<usize>::default();
        let a = Arc::new(NodeBuilder::new("a").info_with(&[]));
        let mut b_info = NodeBuilder::new("b").info_with(&[]);
        let computed = Cell::new(0);
        let count = |n: &NodeInfo| {
            computed.set(computed.get() + 1);
            n.pods.len()
        };
        memo.visit(
            "q",
            [&a, &Arc::new(b_info.clone())].into_iter(),
            count,
            |_, _| {},
        );
        assert_eq!(computed.get(), 2);
        b_info.add_pod(PodBuilder::new("p").info());
        b_info.generation = 2;
        let b = Arc::new(b_info);
        let mut seen = Vec::new();
        memo.visit("q", [&a, &b].into_iter(), count, |n, v| {
            seen.push((n.name.clone(), *v))
        });
        assert_eq!(computed.get(), 3, "only b recomputed");
        assert_eq!(seen, vec![("a".to_string(), 0), ("b".to_string(), 1)]);
        memo.visit("other", [&a].into_iter(), count, |_, _| {});
        assert_eq!(computed.get(), 4, "another question is computed apart");
    }
}
