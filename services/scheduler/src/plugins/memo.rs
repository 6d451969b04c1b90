//! Per-node results remembered across cycles. Counting the pods a selector
//! matches on every node is the cost of PodTopologySpread and
//! InterPodAffinity; consecutive pods of one workload ask the same question,
//! and between two cycles only the nodes whose generation moved (the one
//! that took the last pod, a binding confirmed) hold different pods. So a
//! result is kept per question (`signature`) and node, with the node's
//! generation, and recomputed only when that changed.
//!
//! Many workloads scale up at once (a cluster's Deployments created
//! together), so pods of hundreds of them alternate in the queue: the memo
//! keeps as many questions as its bound on answers allows and, when full,
//! forgets the one asked longest ago. Forgetting everything at once made
//! every question a miss once more workloads alternated than it held, and
//! each miss counts every pod of the cluster again.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::model::NodeInfo;

/// Answers (one per question and node) remembered at most: about 10 MB,
/// a hundred questions over a thousand nodes. More buys little: when more
/// workloads than that alternate, most nodes have changed by the time a
/// question comes back, and the label digests make a recount cheap.
const MAX_ANSWERS: usize = 100_000;

/// Questions remembered at most, whatever the node count.
const MAX_SIGNATURES: usize = 1024;

/// Per node, by the hash of its name: the generation the answer was
/// computed at, and the answer. A node's generation is the cache's count of
/// changes when that node last changed, so no two nodes share one and a
/// hash and a generation together name one node's state.
type PerNode<V> = foldhash::HashMap<u64, (u64, V)>;

struct Question<V> {
    last_asked: u64,
    per_node: PerNode<V>,
}

struct Questions<V> {
    by_signature: HashMap<String, Question<V>>,
    asked: u64,
    answers: usize,
}

pub struct NodeMemo<V> {
    questions: Mutex<Questions<V>>,
}

impl<V> Default for NodeMemo<V> {
    fn default() -> Self {
        NodeMemo {
            questions: Mutex::new(Questions {
                by_signature: HashMap::new(),
                asked: 0,
                answers: 0,
            }),
        }
    }
}

fn node_key(name: &str) -> u64 {
    foldhash::fast::FixedState::with_seed(0x6e6f_6465).hash_one(name)
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
        let mut questions = self.questions.lock();
        let questions = &mut *questions;
        questions.asked += 1;
        let question = questions
            .by_signature
            .entry(signature.to_string())
            .or_insert_with(|| Question {
                last_asked: 0,
                per_node: PerNode::default(),
            });
        question.last_asked = questions.asked;
        let before = question.per_node.len();
        for node in nodes {
            let entry = question
                .per_node
                .entry(node_key(&node.name))
                .or_insert_with(|| (node.generation, compute(node)));
            if entry.0 != node.generation {
                *entry = (node.generation, compute(node));
            }
            visit(node, &entry.1);
        }
        questions.answers += question.per_node.len() - before;
        questions.forget_the_oldest(signature);
    }
}

impl<V> Questions<V> {
    /// Forgets the questions asked longest ago, all but `current`, until
    /// the memo is within its bounds.
    fn forget_the_oldest(&mut self, current: &str) {
        while self.answers > MAX_ANSWERS || self.by_signature.len() > MAX_SIGNATURES {
            let oldest = self
                .by_signature
                .iter()
                .filter(|(signature, _)| signature.as_str() != current)
                .min_by_key(|(_, question)| question.last_asked)
                .map(|(signature, _)| signature.clone());
            let Some(oldest) = oldest else { return };
            if let Some(question) = self.by_signature.remove(&oldest) {
                self.answers -= question.per_node.len();
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

    #[test]
    fn forgets_the_question_asked_longest_ago_when_full() {
        let memo = NodeMemo::<usize>::default();
        let nodes: Vec<Arc<NodeInfo>> = (0..1000)
            .map(|i| Arc::new(NodeBuilder::new(&format!("n{i}")).info_with(&[])))
            .collect();
        let computed = Cell::new(0);
        let count = |_: &NodeInfo| {
            computed.set(computed.get() + 1);
            0
        };
        let fits = MAX_ANSWERS / nodes.len();
        for q in 0..fits {
            memo.visit(&format!("q{q}"), nodes.iter(), count, |_, _| {});
        }
        // Asked again, q0 is now the most recent: q1 goes first.
        memo.visit("q0", nodes.iter(), count, |_, _| {});
        memo.visit("new", nodes.iter(), count, |_, _| {});
        assert_eq!(memo.questions.lock().answers, MAX_ANSWERS);
        computed.set(0);
        memo.visit("q0", nodes.iter(), count, |_, _| {});
        assert_eq!(computed.get(), 0, "q0 was kept");
        memo.visit("q1", nodes.iter(), count, |_, _| {});
        assert_eq!(computed.get(), nodes.len(), "q1 was forgotten");
    }
}
