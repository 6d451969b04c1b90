//! NodeResourcesFit's scoring strategies: LeastAllocated (kube's default:
//! emptier nodes score higher), MostAllocated (bin packing), and
//! RequestedToCapacityRatio (a utilization-to-score shape).

use serde::Deserialize;

use super::allocation::ResourceSpec;
use crate::framework::{ArgsError, MAX_NODE_SCORE};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StrategyArgs {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub resources: Option<Vec<ResourceSpec>>,
    pub requested_to_capacity_ratio: Option<RatioArgs>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RatioArgs {
    pub shape: Vec<ShapePoint>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShapePoint {
    pub utilization: i64,
    pub score: i64,
}

/// Shape scores are 0..=10; node scores 0..=100.
const MAX_CUSTOM_PRIORITY_SCORE: i64 = 10;

#[derive(Debug, Clone, PartialEq)]
pub enum ScoringStrategy {
    LeastAllocated,
    MostAllocated,
    RequestedToCapacityRatio(Vec<ShapePoint>),
}

impl ScoringStrategy {
    pub fn from_args(args: &StrategyArgs) -> Result<ScoringStrategy, ArgsError> {
        match args.kind.as_deref().unwrap_or("LeastAllocated") {
            "LeastAllocated" => Ok(ScoringStrategy::LeastAllocated),
            "MostAllocated" => Ok(ScoringStrategy::MostAllocated),
            "RequestedToCapacityRatio" => {
                let shape = args.requested_to_capacity_ratio.as_ref().map(|r| r.shape.clone()).unwrap_or_default();
                check_shape(&shape)?;
                let scaled = shape
                    .iter()
                    .map(|p| ShapePoint { utilization: p.utilization, score: p.score * (MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE) })
                    .collect();
                Ok(ScoringStrategy::RequestedToCapacityRatio(scaled))
            }
            other => Err(ArgsError::new(
                "scoringStrategy.type",
                format!(
                    "Unsupported value: {other:?}: supported values: \"LeastAllocated\", \"MostAllocated\", \"RequestedToCapacityRatio\""
                ),
            )),
        }
    }

    /// The weighted score of a node from per-resource (requested, allocatable).
    pub fn score(&self, specs: &[ResourceSpec], requested: &[i64], allocatable: &[i64]) -> i64 {
        let (mut total, mut weights) = (0i64, 0i64);
        for (i, spec) in specs.iter().enumerate() {
            if allocatable[i] == 0 {
                continue;
            }
            let score = match self {
                ScoringStrategy::LeastAllocated => least_requested(requested[i], allocatable[i]),
                ScoringStrategy::MostAllocated => most_requested(requested[i], allocatable[i]),
                ScoringStrategy::RequestedToCapacityRatio(shape) => {
                    let score = ratio_score(shape, requested[i], allocatable[i]);
                    if score <= 0 {
                        continue;
                    }
                    score
                }
            };
            total += score * spec.weight;
            weights += spec.weight;
        }
        if weights == 0 {
            return 0;
        }
        match self {
            ScoringStrategy::RequestedToCapacityRatio(_) => {
                (total as f64 / weights as f64).round() as i64
            }
            _ => total / weights,
        }
    }
}

fn least_requested(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

fn most_requested(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    requested.min(capacity) * MAX_NODE_SCORE / capacity
}

fn ratio_score(shape: &[ShapePoint], requested: i64, capacity: i64) -> i64 {
    let utilization = if capacity == 0 || requested > capacity {
        100
    } else {
        requested * 100 / capacity
    };
    broken_linear(shape, utilization)
}

fn broken_linear(shape: &[ShapePoint], p: i64) -> i64 {
    for (i, point) in shape.iter().enumerate() {
        if p <= point.utilization {
            if i == 0 {
                return point.score;
            }
            let previous = shape[i - 1];
            return previous.score
                + (point.score - previous.score) * (p - previous.utilization)
                    / (point.utilization - previous.utilization);
        }
    }
    shape.last().map_or(0, |p| p.score)
}

fn check_shape(shape: &[ShapePoint]) -> Result<(), ArgsError> {
    let field = "scoringStrategy.requestedToCapacityRatio.shape";
    if shape.is_empty() {
        return Err(ArgsError::new(
            field,
            "Required value: at least one point must be specified",
        ));
    }
    for (i, point) in shape.iter().enumerate() {
        if !(0..=100).contains(&point.utilization) {
            return Err(ArgsError::new(
                format!("{field}[{i}].utilization"),
                "Invalid value: not in valid range [0, 100]",
            ));
        }
        if i > 0 && point.utilization <= shape[i - 1].utilization {
            return Err(ArgsError::new(
                format!("{field}[{i}].utilization"),
                "Invalid value: utilization values must be sorted in increasing order",
            ));
        }
        if !(0..=MAX_CUSTOM_PRIORITY_SCORE).contains(&point.score) {
            return Err(ArgsError::new(
                format!("{field}[{i}].score"),
                "Invalid value: not in valid range [0, 10]",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs() -> Vec<ResourceSpec> {
        super::super::allocation::default_resources()
    }

    #[test]
    fn least_and_most_allocated_table() {
        // cpu 3000/4000 used, memory 5000/10000 used.
        let (requested, allocatable) = (vec![3000, 5000], vec![4000, 10000]);
        assert_eq!(
            ScoringStrategy::LeastAllocated.score(&specs(), &requested, &allocatable),
            (25 + 50) / 2
        );
        assert_eq!(
            ScoringStrategy::MostAllocated.score(&specs(), &requested, &allocatable),
            (75 + 50) / 2
        );
        // Over capacity: least gives 0, most caps at 100.
        let over = vec![5000, 20000];
        assert_eq!(
            ScoringStrategy::LeastAllocated.score(&specs(), &over, &allocatable),
            0
        );
        assert_eq!(
            ScoringStrategy::MostAllocated.score(&specs(), &over, &allocatable),
            100
        );
    }

    #[test]
    fn ratio_shape_interpolates() {
        let shape = vec![
            ShapePoint {
                utilization: 0,
                score: 0,
            },
            ShapePoint {
                utilization: 100,
                score: 100,
            },
        ];
        let strategy = ScoringStrategy::RequestedToCapacityRatio(shape);
        assert_eq!(strategy.score(&specs(), &[500, 0], &[1000, 1000]), 50);
        let bad = StrategyArgs {
            kind: Some("RequestedToCapacityRatio".into()),
            resources: None,
            requested_to_capacity_ratio: Some(RatioArgs {
                shape: vec![ShapePoint {
                    utilization: 50,
                    score: 11,
                }],
            }),
        };
        assert_eq!(
            ScoringStrategy::from_args(&bad).unwrap_err().field,
            "scoringStrategy.requestedToCapacityRatio.shape[0].score"
        );
    }
}
