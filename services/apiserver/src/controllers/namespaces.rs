//! Terminating namespaces: deleting one again resumes the removal of its
//! contents (see `registry::deletion`), which matters when the contents
//! were held by finalizers or the API server that started it stopped.

use super::world::{self, World};
use crate::registry::options::DeleteOptions;

pub async fn pass(world: &World) {
    for node in &world.nodes {
        if node.entry.strategy.def().deletion.holds_contents && node.deleting() {
            world::delete(node, DeleteOptions::default()).await;
        }
    }
}
