//! Terminating namespaces: deleting one again resumes the removal of its
//! contents (see `registry::deletion`), which matters when the contents
//! were held by finalizers or the API server that started it stopped.

use super::world::{self, World};
use crate::registry::options::DeleteOptions;
use crate::registry::Catalog;

pub async fn pass(catalog: &Catalog, world: &World) {
    for node in &world.nodes {
        let strategy = &catalog.entries()[node.entry].strategy;
        if strategy.holds_contents() && node.deleting() {
            world::delete(catalog, node, DeleteOptions::default()).await;
        }
    }
}
