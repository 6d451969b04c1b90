//! ImageLocality: prefers nodes that already have the pod's images, by size,
//! scaled by how widely each image is spread (so one node holding a popular
//! image does not attract every pod).

use std::collections::HashMap;
use std::sync::Arc;

use crate::framework::{
    ArgsError, CycleState, Plugin, PluginContext, PreScorePlugin, ScorePlugin, Snapshot, Status,
    MAX_NODE_SCORE,
};
use crate::model::{normalized_image_name, NodeInfo, PodInfo};

const MB: i64 = 1024 * 1024;
/// Below this sum of sizes a node scores 0.
const MIN_THRESHOLD: i64 = 23 * MB;
/// Per container, above this sum a node scores the maximum.
const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

pub struct ImageLocality;

const STATE_KEY: &str = "PreScoreImageLocality";

#[derive(Clone)]
struct ImageSpread {
    /// The pod's images, normalized.
    images: Vec<String>,
    image_nodes: Arc<HashMap<String, usize>>,
    total_nodes: usize,
}

impl ImageLocality {
    pub const NAME: &'static str = "ImageLocality";

    pub fn factory(_: &PluginContext) -> Result<Arc<dyn Plugin>, ArgsError> {
        Ok(Arc::new(ImageLocality))
    }
}

impl Plugin for ImageLocality {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    crate::serves!(pre_score, score);
}

impl PreScorePlugin for ImageLocality {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[Arc<NodeInfo>],
        snapshot: &Snapshot,
    ) -> Status {
        let spec = pod.spec();
        let images = spec
            .init_containers
            .iter()
            .flatten()
            .chain(&spec.containers)
            .map(|c| normalized_image_name(c.image.as_deref().unwrap_or_default()))
            .collect();
        state.write(
            STATE_KEY,
            ImageSpread {
                images,
                image_nodes: snapshot.image_nodes.clone(),
                total_nodes: snapshot.len().max(1),
            },
        );
        Status::success()
    }
}

impl ScorePlugin for ImageLocality {
    fn score(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(spread) = state.read::<ImageSpread>(STATE_KEY) else {
            return Ok(0);
        };
        if node.images.is_empty() {
            return Ok(0);
        }
        let sum: i64 = spread
            .images
            .iter()
            .filter_map(|image| {
                let size = *node.images.get(image)?;
                let nodes = spread.image_nodes.get(image).copied().unwrap_or(1);
                Some((size as f64 * nodes as f64 / spread.total_nodes as f64) as i64)
            })
            .sum();
        Ok(priority(sum, spread.images.len()))
    }
}

fn priority(sum: i64, containers: usize) -> i64 {
    let max = MAX_CONTAINER_THRESHOLD * containers.max(1) as i64;
    let clamped = sum.clamp(MIN_THRESHOLD, max);
    MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) / (max - MIN_THRESHOLD)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testing::{NodeBuilder, PodBuilder};

    #[test]
    fn score_table() {
        let big = 500 * MB;
        let nodes = vec![
            NodeBuilder::new("has")
                .image("gcr.io/web:v1", big)
                .info_with(&[]),
            NodeBuilder::new("also")
                .image("gcr.io/web:v1", big)
                .info_with(&[]),
            NodeBuilder::new("none").info_with(&[]),
            NodeBuilder::new("small")
                .image("gcr.io/tiny", 10 * MB)
                .info_with(&[]),
        ];
        let snapshot = Snapshot::from_infos(nodes);
        let score = |pod: PodBuilder, node: &str| {
            let pod = pod.info();
            let mut state = CycleState::new();
            ImageLocality.pre_score(&mut state, &pod, &[], &snapshot);
            ImageLocality
                .score(&state, &pod, snapshot.get(node).unwrap())
                .unwrap()
        };
        // 500MB spread over 2 of 4 nodes counts 250MB: 100 * (250-23)/(1000-23) = 23.
        assert_eq!(
            score(PodBuilder::new("p").image("gcr.io/web:v1"), "has"),
            23
        );
        assert_eq!(
            score(PodBuilder::new("p").image("gcr.io/web:v1"), "none"),
            0
        );
        // Names are normalized: "gcr.io/tiny" is "gcr.io/tiny:latest"; below the threshold.
        assert_eq!(
            score(PodBuilder::new("p").image("gcr.io/tiny:latest"), "small"),
            0
        );
    }

    #[test]
    fn image_names_are_normalized() {
        assert_eq!(normalized_image_name("nginx"), "nginx:latest");
        assert_eq!(normalized_image_name("nginx:1.27"), "nginx:1.27");
        assert_eq!(
            normalized_image_name("localhost:5000/app"),
            "localhost:5000/app:latest"
        );
        assert_eq!(normalized_image_name("app@sha256:abc"), "app@sha256:abc");
    }
}
