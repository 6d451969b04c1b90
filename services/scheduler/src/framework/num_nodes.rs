//! How many feasible nodes a cycle looks for before it stops filtering
//! (percentageOfNodesToScore, with kube's adaptive default).

/// Below this many nodes every node is filtered and scored.
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// The adaptive percentage never goes below this.
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: i32 = 5;
/// The adaptive percentage at a cluster of zero nodes.
const BASE_PERCENTAGE_OF_NODES_TO_SCORE: i32 = 50;

/// kube's `numFeasibleNodesToFind`: all nodes under 100 or at 100%; else
/// `percentage` of them (0 means adaptive: 50% minus one point per 125 nodes,
/// at least 5%), and never fewer than 100.
pub fn num_feasible_nodes_to_find(percentage: i32, all_nodes: usize) -> usize {
    if all_nodes < MIN_FEASIBLE_NODES_TO_FIND || percentage >= 100 {
        return all_nodes;
    }
    let mut adaptive = percentage;
    if adaptive <= 0 {
        adaptive = BASE_PERCENTAGE_OF_NODES_TO_SCORE - (all_nodes / 125) as i32;
        adaptive = adaptive.max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND);
    }
    let count = all_nodes * adaptive as usize / 100;
    count.max(MIN_FEASIBLE_NODES_TO_FIND)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adaptive_percentage_table() {
        let cases = [
            (0, 10, 10),
            (0, 99, 99),
            (0, 100, 100),
            (0, 1000, 420),
            (0, 5000, 500),
            (0, 10_000, 500),
            (0, 20_000, 1000),
            (30, 1000, 300),
            (30, 200, 100),
            (100, 5000, 5000),
        ];
        for (percentage, nodes, want) in cases {
            assert_eq!(
                num_feasible_nodes_to_find(percentage, nodes),
                want,
                "{percentage}% of {nodes}"
            );
        }
    }
}
