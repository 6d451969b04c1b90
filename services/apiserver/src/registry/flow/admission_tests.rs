//! Admission in the generic flow, on the in-memory storage: a mutating
//! plugin's change is what gets stored, a validating plugin sees the
//! object after the strategy's defaults and the mutations, and a denial
//! is a 403 Status that stores nothing.

use std::sync::Arc;

use serde_json::{json, Value};

use super::tests::{config_map, handle, with_default_namespace};
use crate::admission::{allow, AdmissionError, Admit, Attributes, Chain, Operation, Plugin};
use crate::auth::UserInfo;
use crate::error::ApiError;
use crate::object::patch::PatchType;
use crate::registry::flow::{self, Handle, Part};
use crate::registry::options::{DeleteOptions, WriteOptions};
use crate::storage::{Interface, MemoryStorage};

/// Labels every object with the operation and the user that wrote it.
struct Stamp;

impl Plugin for Stamp {
    fn name(&self) -> &str {
        "Stamp"
    }

    fn mutate<'a>(&'a self, a: &'a Attributes<'a>, object: &'a mut Value) -> Admit<'a> {
        let labels = &mut object["metadata"]["labels"];
        labels["op"] = a.operation.as_str().to_lowercase().into();
        labels["by"] = a.user.name.replace(':', ".").into();
        a.feedback.warn(format!("stamped by {}", a.user.name));
        allow()
    }
}

/// Refuses objects whose data says `deny`, objects not stamped yet, and
/// deletes of objects labelled `keep`.
struct Guard;

impl Plugin for Guard {
    fn name(&self) -> &str {
        "Guard"
    }

    fn validate<'a>(&'a self, a: &'a Attributes<'a>, object: Option<&'a Value>) -> Admit<'a> {
        let refuse = |reason: &str| Err(AdmissionError::denied(self.name(), reason));
        let answer = match (a.operation, object) {
            (Operation::Delete, None)
                if a.old_object.unwrap()["metadata"]["labels"]["keep"] == "yes" =>
            {
                refuse("kept")
            }
            (_, Some(o)) if o["data"]["v"] == "deny" => refuse("denied by data"),
            (_, Some(o)) if o["metadata"]["labels"]["op"].is_null() => refuse("not stamped"),
            _ => Ok(()),
        };
        Box::pin(std::future::ready(answer))
    }
}

fn admitting(store: &Arc<MemoryStorage>) -> Handle {
    Handle {
        admission: Arc::new(Chain::new(vec![Arc::new(Guard), Arc::new(Stamp)])),
        ..handle(store, "configmaps")
    }
}

fn as_user(name: &str) -> WriteOptions {
    WriteOptions::default().with_user(UserInfo::named(name, &[]))
}

async fn stored(store: &MemoryStorage, name: &str) -> Option<Value> {
    let key = format!("/registry/configmaps/default/{name}");
    store.get(&key).await.unwrap().map(|s| s.object)
}

#[tokio::test]
async fn a_mutating_plugins_change_is_stored() {
    let store = with_default_namespace().await;
    let h = admitting(&store);
    let body = config_map("a", json!({"v": "1"}));
    let reply = flow::create(&h, "default", body, as_user("alice"))
        .await
        .unwrap();
    assert_eq!(reply.body["metadata"]["labels"]["op"], "create");
    assert_eq!(reply.warnings, ["stamped by alice"], "a plugin's warning");
    let object = stored(&store, "a").await.expect("stored");
    assert_eq!(
        object["metadata"]["labels"],
        json!({"op": "create", "by": "alice"})
    );
    let patch = json!({"data": {"v": "2"}});
    let kind = PatchType::Merge;
    let reply = flow::patch(&h, "default", "a", Part::Main, kind, patch, as_user("bob"))
        .await
        .unwrap();
    assert_eq!(reply.warnings, ["stamped by bob"]);
    let object = stored(&store, "a").await.expect("stored");
    assert_eq!(
        object["metadata"]["labels"],
        json!({"op": "update", "by": "bob"})
    );
    assert_eq!(object["data"]["v"], "2");
}

#[tokio::test]
async fn a_validating_plugins_denial_stores_nothing() {
    let store = with_default_namespace().await;
    let h = admitting(&store);
    let denied = flow::create(
        &h,
        "default",
        config_map("a", json!({"v": "deny"})),
        as_user("a"),
    )
    .await;
    let err = denied.unwrap_err();
    assert_eq!(err.code(), 403);
    assert_eq!(err.status()["reason"], "Forbidden");
    assert_eq!(
        err.status()["message"],
        "configmaps \"a\" is forbidden: denied by data"
    );
    assert_eq!(
        stored(&store, "a").await,
        None,
        "a denied create stores nothing"
    );
    let dry = WriteOptions {
        dry_run: true,
        ..as_user("a")
    };
    let denied = flow::create(&h, "default", config_map("a", json!({"v": "deny"})), dry).await;
    assert!(
        matches!(denied, Err(ApiError::Forbidden(_))),
        "dry runs are admitted too"
    );

    let mut kept = config_map("b", json!({"v": "1"}));
    kept["metadata"]["labels"] = json!({"keep": "yes"});
    flow::create(&h, "default", kept, as_user("a"))
        .await
        .unwrap();
    let before = stored(&store, "b").await.unwrap();
    let update = flow::patch(
        &h,
        "default",
        "b",
        Part::Main,
        PatchType::Merge,
        json!({"data": {"v": "deny"}}),
        as_user("a"),
    );
    assert_eq!(update.await.unwrap_err().code(), 403);
    assert_eq!(
        stored(&store, "b").await.unwrap(),
        before,
        "a denied update changes nothing"
    );
    let delete = flow::delete(&h, "default", "b", DeleteOptions::default()).await;
    assert_eq!(delete.unwrap_err().code(), 403);
    assert_eq!(
        stored(&store, "b").await.unwrap(),
        before,
        "a denied delete changes nothing"
    );
}
