//! Choosing the node to preempt on among the candidates (kube's
//! `pickOneNodeForPreemption`): fewest budget violations, then the lowest
//! highest-priority victim, then the smallest sum of priorities, then the
//! fewest victims, then the latest start among the highest-priority victims.

use super::victims::{start_time, Victims};

/// A node where preemption would make room, and the pods it would evict.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub node: String,
    pub victims: Victims,
}

type Criterion = fn(&Victims) -> i64;

fn fewest_violations(v: &Victims) -> i64 {
    -(v.pdb_violations as i64)
}

fn lowest_top_priority(v: &Victims) -> i64 {
    -i64::from(v.pods.first().map_or(i32::MIN, |p| p.priority))
}

fn smallest_priority_sum(v: &Victims) -> i64 {
    // Shifted so negative priorities cannot make more victims look better.
    -v.pods
        .iter()
        .map(|p| i64::from(p.priority) + i64::from(i32::MAX) + 1)
        .sum::<i64>()
}

fn fewest_victims(v: &Victims) -> i64 {
    -(v.pods.len() as i64)
}

fn latest_start_of_top_priority(v: &Victims) -> i64 {
    let Some(top) = v.pods.first().map(|p| p.priority) else {
        return i64::MIN;
    };
    v.pods
        .iter()
        .filter(|p| p.priority == top)
        .filter_map(|p| start_time(p))
        .map(|t| t.0.timestamp_nanos_opt().unwrap_or(i64::MAX))
        .min()
        .unwrap_or(i64::MIN)
}

const CRITERIA: [Criterion; 5] = [
    fewest_violations,
    lowest_top_priority,
    smallest_priority_sum,
    fewest_victims,
    latest_start_of_top_priority,
];

/// The best candidate; ties after every criterion go to the first.
pub fn pick(candidates: &[Candidate]) -> Option<&Candidate> {
    let mut remaining: Vec<&Candidate> = candidates.iter().collect();
    for criterion in CRITERIA {
        if remaining.len() <= 1 {
            break;
        }
        let best = remaining.iter().map(|c| criterion(&c.victims)).max()?;
        remaining.retain(|c| criterion(&c.victims) == best);
    }
    remaining.first().copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testing::PodBuilder;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use std::sync::Arc;

    fn victim(priority: i32, started_seconds: i64) -> Arc<crate::model::PodInfo> {
        let mut pod = PodBuilder::new(&format!("v{priority}-{started_seconds}"))
            .priority(priority)
            .build();
        let started = k8s_openapi::chrono::DateTime::from_timestamp(started_seconds, 0).unwrap();
        pod.status = Some(k8s_openapi::api::core::v1::PodStatus {
            start_time: Some(Time(started)),
            ..Default::default()
        });
        crate::model::PodInfo::new(Arc::new(pod))
    }

    fn candidate(
        node: &str,
        pods: Vec<Arc<crate::model::PodInfo>>,
        pdb_violations: usize,
    ) -> Candidate {
        Candidate {
            node: node.into(),
            victims: Victims {
                pods,
                pdb_violations,
            },
        }
    }

    #[test]
    fn criteria_in_kube_order() {
        let cases: Vec<(&str, Vec<Candidate>, &str)> = vec![
            (
                "fewest budget violations first",
                vec![
                    candidate("a", vec![victim(1, 0)], 1),
                    candidate("b", vec![victim(5, 0), victim(5, 0)], 0),
                ],
                "b",
            ),
            (
                "then the lowest highest priority",
                vec![
                    candidate("a", vec![victim(5, 0)], 0),
                    candidate("b", vec![victim(3, 0), victim(3, 0)], 0),
                ],
                "b",
            ),
            (
                "then the smallest sum of priorities",
                vec![
                    candidate("a", vec![victim(3, 0), victim(2, 0)], 0),
                    candidate("b", vec![victim(3, 0), victim(1, 0)], 0),
                ],
                "b",
            ),
            (
                "then the fewest victims",
                vec![
                    candidate("a", vec![victim(-5, 0), victim(-5, 0)], 0),
                    candidate("b", vec![victim(-5, 0)], 0),
                ],
                "b",
            ),
            (
                "then the latest started top-priority victims",
                vec![
                    candidate("a", vec![victim(3, 100)], 0),
                    candidate("b", vec![victim(3, 200)], 0),
                ],
                "b",
            ),
            (
                "then the first",
                vec![
                    candidate("a", vec![victim(3, 100)], 0),
                    candidate("b", vec![victim(3, 100)], 0),
                ],
                "a",
            ),
        ];
        for (name, candidates, want) in cases {
            assert_eq!(pick(&candidates).unwrap().node, want, "{name}");
        }
    }
}
