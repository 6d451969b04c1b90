//! What a namespace holds: every namespaced type, whose objects in a
//! namespace are deleted when the namespace goes. The built-in types are
//! there from the start; a custom type joins while it is served and leaves
//! when its definition goes, so a namespace never outlives its widgets.

use std::sync::{Arc, RwLock};

use super::handle::Handle;

#[derive(Clone, Default)]
pub struct NamespaceContents(Arc<RwLock<Vec<Handle>>>);

impl NamespaceContents {
    pub fn new(types: Vec<Handle>) -> NamespaceContents {
        NamespaceContents(Arc::new(RwLock::new(types)))
    }

    /// The types now, to walk without holding the lock across awaits.
    pub fn types(&self) -> Vec<Handle> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Adds `handle`'s type, in place of one with the same group and
    /// resource.
    pub fn serve(&self, handle: Handle) {
        let def = handle.strategy.def();
        let (group, resource) = (def.group, def.resource);
        let mut types = self.0.write().unwrap_or_else(|e| e.into_inner());
        types.retain(|h| !same_type(h, group, resource));
        types.push(handle);
    }

    pub fn withdraw(&self, group: &str, resource: &str) {
        let mut types = self.0.write().unwrap_or_else(|e| e.into_inner());
        types.retain(|h| !same_type(h, group, resource));
    }
}

fn same_type(handle: &Handle, group: &str, resource: &str) -> bool {
    let def = handle.strategy.def();
    def.group == group && def.resource == resource
}
