//! Per-node results remembered across cycles. Counting the pods a selector
//! matches on every node is the cost of PodTopologySpread and
//! InterPodAffinity; consecutive pods of one workload ask the same question,
//! and between two cycles only the nodes whose generation moved (the one
//! that took the last pod, a binding confirmed) hold different pods. So a
//! result is kept per question (`signature`) and node, with the node's
//! generation, and recomputed only when that changed.
//!
//! Many workloads scale up at once (a cluster's Deployments created
//! together), so pods of hundreds of them alternate in the queue. When the
//! memo is full, a new question takes the place of one nobody asked for a
//! while; if every kept question is still being asked, the new one is
//! answered without being kept. (Evicting the least recently asked instead
//! made every question a miss once more workloads alternated than it held:
//! a cycle through them always evicts the next one asked.)

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::model::NodeInfo;

/// Answers (one per question and node) remembered at most, about 7 MB for
/// counts: three hundred questions over a thousand nodes (a node's answer
/// may come in past the bound by one question's nodes).
const MAX_ANSWERS: usize = 300_000;

/// Questions remembered at most, whatever the node count.
const MAX_SIGNATURES: usize = 1024;

/// A question not asked in this many asks may give its place to a new one.
const STALE_AFTER: u64 = 2_000;

/// One node's answer: the node (its name's hash, cut to 32 bits) and the
/// generation the answer was computed at. A node's generation is the
/// cache's count of changes when that node last changed, so no two nodes
/// share one, and a generation alone names one node's state; the name's
/// hash guards against a list whose nodes moved (a slot that names
/// another node is recomputed, never misread).
struct Slot<V> {
    generation: u64,
    node: u32,
    answer: V,
}

/// Answers by the node's position in the list asked about: the snapshot
/// keeps its nodes in place between cycles, so positions are stable and a
/// slot costs no hash table (at a thousand nodes a question's answers take
/// 24 KB when its answer is a count).
struct Question<V> {
    last_asked: u64,
    slots: Vec<Option<Slot<V>>>,
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

fn node_key(name: &str) -> u32 {
    foldhash::fast::FixedState::with_seed(0x6e6f_6465).hash_one(name) as u32
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
        if !questions.by_signature.contains_key(signature) && !questions.make_room() {
            for node in nodes {
                visit(node, &compute(node));
            }
            return;
        }
        let question = questions
            .by_signature
            .entry(signature.to_string())
            .or_insert_with(|| Question {
                last_asked: 0,
                slots: Vec::new(),
            });
        question.last_asked = questions.asked;
        let before = question.slots.len();
        for (position, node) in nodes.enumerate() {
            if position == question.slots.len() {
                question.slots.push(None);
            }
            let slot = &mut question.slots[position];
            let key = node_key(&node.name);
            let current = slot
                .as_ref()
                .is_some_and(|s| s.generation == node.generation && s.node == key);
            if !current {
                *slot = Some(Slot {
                    generation: node.generation,
                    node: key,
                    answer: compute(node),
                });
            }
            if let Some(slot) = slot {
                visit(node, &slot.answer);
            }
        }
        questions.answers += question.slots.len() - before;
    }

    /// Questions remembered now.
    #[cfg(test)]
    pub fn questions(&self) -> usize {
        self.questions.lock().by_signature.len()
    }
}

impl<V> Questions<V> {
    /// Whether a new question can be kept: the memo has room, or can make
    /// it by forgetting questions not asked for [`STALE_AFTER`] asks.
    fn make_room(&mut self) -> bool {
        while self.answers >= MAX_ANSWERS || self.by_signature.len() >= MAX_SIGNATURES {
            let oldest = self
                .by_signature
                .iter()
                .min_by_key(|(_, question)| question.last_asked)
                .filter(|(_, question)| self.asked - question.last_asked > STALE_AFTER)
                .map(|(signature, _)| signature.clone());
            let Some(oldest) = oldest else { return false };
            if let Some(question) = self.by_signature.remove(&oldest) {
                self.answers -= question.slots.len();
            }
        }
        true
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
    fn a_node_moved_in_the_list_is_recomputed_not_misread() {
        let memo = NodeMemo::<String>::default();
        // Two nodes at one generation (the cache never makes such, tests can).
        let a = Arc::new(NodeBuilder::new("a").info_with(&[]));
        let b = Arc::new(NodeBuilder::new("b").info_with(&[]));
        let name = |n: &NodeInfo| n.name.clone();
        memo.visit("q", [&a, &b].into_iter(), name, |_, _| {});
        let mut seen = Vec::new();
        memo.visit("q", [&b, &a].into_iter(), name, |n, v| {
            seen.push((n.name.clone(), v.clone()))
        });
        let expected = [("b", "b"), ("a", "a")].map(|(n, v)| (n.to_string(), v.to_string()));
        assert_eq!(seen, expected);
    }

    #[test]
    fn a_full_memo_keeps_a_new_question_only_in_place_of_a_stale_one() {
        let memo = NodeMemo::<usize>::default();
        let nodes: Vec<Arc<NodeInfo>> = (0..1000)
            .map(|i| Arc::new(NodeBuilder::new(&format!("n{i}")).info_with(&[])))
            .collect();
        let computed = Cell::new(0);
        let count = |_: &NodeInfo| {
            computed.set(computed.get() + 1);
            0
        };
        let ask = |question: &str| {
            computed.set(0);
            memo.visit(question, nodes.iter(), count, |_, _| {});
            computed.get()
        };
        let fits = MAX_ANSWERS / nodes.len();
        for q in 0..fits {
            assert_eq!(ask(&format!("q{q}")), nodes.len());
        }
        assert_eq!(ask("new"), nodes.len());
        assert_eq!(ask("new"), nodes.len(), "a full memo did not keep it");
        assert_eq!(ask("q0"), 0, "the kept ones are still answered");
        for _ in 0..=STALE_AFTER {
            assert_eq!(ask("q0"), 0);
        }
        assert_eq!(ask("new"), nodes.len());
        assert_eq!(ask("new"), 0, "kept in the place of a stale one");
        assert_eq!(ask("q0"), 0, "the one asked lately stays");
        assert_eq!(memo.questions.lock().answers, MAX_ANSWERS);
    }
}
