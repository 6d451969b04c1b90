//! What an informer drops before caching an object. Controllers never
//! read `managedFields` or kubectl's last-applied annotation, and on a
//! pod they are often larger than the rest of the object: with 30,000
//! pods cached in several processes that is most of the memory.

use std::sync::Arc;

use kube::Resource;

/// kubectl's client-side apply record.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// A transform run on each object before it is cached.
pub type TransformFn<K> = Arc<dyn Fn(&mut K) + Send + Sync>;

/// Drops `managedFields` and the last-applied annotation, and trims the
/// metadata's lists to their length.
pub fn strip_for_cache<K: Resource>(object: &mut K) {
    let meta = object.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
    fit(&mut meta.owner_references);
    fit(&mut meta.finalizers);
}

/// Gives a decoded list back the room it does not use. serde fills a
/// `Vec` by pushing, and a pushed-to `Vec` of small elements holds at
/// least four places: a pod's one container status keeps room for four
/// (2.6 KB), which over every cached pod is a third of the cache.
pub(super) fn fit<T>(list: &mut Option<Vec<T>>) {
    if let Some(list) = list {
        list.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    #[test]
    fn managed_fields_and_last_applied_go_other_annotations_stay() {
        let mut cm: ConfigMap = serde_json::from_value(json!({"metadata": {
            "name": "c",
            "annotations": {LAST_APPLIED: "{...}", "keep": "me"},
            "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
        }}))
        .unwrap();
        strip_for_cache(&mut cm);
        assert!(cm.metadata.managed_fields.is_none());
        let annotations = cm.metadata.annotations.unwrap();
        assert_eq!(annotations.len(), 1);
        assert_eq!(annotations["keep"], "me");
    }

    #[test]
    fn owner_references_keep_no_spare_room() {
        let mut cm: ConfigMap = serde_json::from_value(json!({"metadata": {
            "name": "c",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"}],
        }}))
        .unwrap();
        strip_for_cache(&mut cm);
        assert_eq!(cm.metadata.owner_references.unwrap().capacity(), 1);
    }
}
