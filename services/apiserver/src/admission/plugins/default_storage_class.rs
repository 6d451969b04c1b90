//! `DefaultStorageClass`: a PersistentVolumeClaim that names no storage
//! class gets the default one, the StorageClass annotated
//! `storageclass.kubernetes.io/is-default-class: "true"` (the newest when
//! several are, as kube picks); without one it is left as it is.

use std::sync::Arc;

use serde_json::Value;

use crate::admission::objects::{Freshness, Objects, STORAGE_CLASSES};
use crate::admission::{Admit, Attributes, Operation, Plugin};

const NAME: &str = "DefaultStorageClass";
const DEFAULT_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

pub struct DefaultStorageClass {
    objects: Arc<dyn Objects>,
}

impl DefaultStorageClass {
    pub fn new(objects: Arc<dyn Objects>) -> DefaultStorageClass {
        DefaultStorageClass { objects }
    }
}

impl Plugin for DefaultStorageClass {
    fn name(&self) -> &str {
        NAME
    }

    fn mutate<'a>(&'a self, a: &'a Attributes<'a>, claim: &'a mut Value) -> Admit<'a> {
        Box::pin(async move {
            let is_claim = a.group.is_empty()
                && a.resource == "persistentvolumeclaims"
                && a.subresource.is_empty();
            if !is_claim || a.operation != Operation::Create {
                return Ok(());
            }
            if !claim["spec"]["storageClassName"].is_null() {
                return Ok(());
            }
            let classes = self
                .objects
                .list(STORAGE_CLASSES, "", Freshness::Cached)
                .await?;
            let default = classes
                .into_iter()
                .filter(|c| c["metadata"]["annotations"][DEFAULT_ANNOTATION] == "true")
                .max_by(|x, y| {
                    let created = |c: &Value| {
                        c["metadata"]["creationTimestamp"]
                            .as_str()
                            .unwrap_or("")
                            .to_string()
                    };
                    created(x).cmp(&created(y))
                });
            if let Some(class) = default {
                claim["spec"]["storageClassName"] = class["metadata"]["name"].clone();
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{attributes, Memory};
    use super::*;
    use crate::auth::UserInfo;

    #[tokio::test]
    async fn a_claim_without_a_class_gets_the_default() {
        let objects = Arc::new(Memory::default());
        let plugin = DefaultStorageClass::new(objects.clone());
        let user = UserInfo::anonymous();
        let create = attributes(
            Operation::Create,
            "persistentvolumeclaims",
            "ns",
            "c",
            &user,
        );
        let mut claim = json!({"spec": {}});
        plugin.mutate(&create, &mut claim).await.unwrap();
        assert!(
            claim["spec"]["storageClassName"].is_null(),
            "no default yet"
        );
        objects.put(STORAGE_CLASSES, json!({"metadata": {"name": "slow"}}));
        objects.put(
            STORAGE_CLASSES,
            json!({"metadata": {"name": "fast",
            "annotations": {DEFAULT_ANNOTATION: "true"}}}),
        );
        plugin.mutate(&create, &mut claim).await.unwrap();
        assert_eq!(claim["spec"]["storageClassName"], "fast");
        let mut named = json!({"spec": {"storageClassName": "slow"}});
        plugin.mutate(&create, &mut named).await.unwrap();
        assert_eq!(named["spec"]["storageClassName"], "slow");
    }
}
