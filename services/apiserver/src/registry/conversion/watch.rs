//! A watcher's items in the served version: the shared watch cache holds
//! objects as stored, so each watcher of a converted version gets its
//! items through a task that converts them in order. A bookmark only
//! changes its apiVersion. An item that cannot be converted ends the
//! watch with an ERROR event (the client watches again, as after any
//! error).

use std::sync::Arc;

use serde_json::json;
use tokio::sync::mpsc;

use super::converted::Converted;
use crate::cache::{EventType, WatchItem, WATCHER_BUFFER};
use crate::storage::Object;

/// `items` as `view`'s version.
pub fn convert_items(
    mut items: mpsc::Receiver<WatchItem>,
    view: Converted,
) -> mpsc::Receiver<WatchItem> {
    let (sender, receiver) = mpsc::channel(WATCHER_BUFFER);
    tokio::spawn(async move {
        loop {
            // A watcher that went away stops the task (and so its cache
            // watcher) at once, not at the type's next event.
            let item = tokio::select! {
                item = items.recv() => item,
                _ = sender.closed() => None,
            };
            let Some(item) = item else { return };
            let converted = match convert(&view, item).await {
                Ok(item) => item,
                Err(error) => {
                    let _ = sender.send(error).await;
                    return;
                }
            };
            if sender.send(converted).await.is_err() {
                return;
            }
        }
    });
    receiver
}

async fn convert(view: &Converted, mut item: WatchItem) -> Result<WatchItem, WatchItem> {
    if matches!(item.kind, EventType::Bookmark | EventType::Error) {
        let mut value = item.object.value();
        if value.get("apiVersion").is_some() && item.kind == EventType::Bookmark {
            value["apiVersion"] = view.served().into();
        }
        item.object = Arc::new(Object::new("", value, item.object.revision(), &[]));
        return Ok(item);
    }
    let mut values = vec![item.object.value()];
    values.extend(item.previous.as_ref().map(|p| p.value()));
    let converted = view.read(values).await.map_err(|err| error_item(&err))?;
    let mut converted = converted.into_iter();
    let rebuild =
        |old: &Object, value| Arc::new(Object::new(old.key(), value, old.revision(), &[]));
    if let Some(value) = converted.next() {
        item.object = rebuild(&item.object, value);
    }
    if let (Some(old), Some(value)) = (item.previous.as_ref(), converted.next()) {
        item.previous = Some(rebuild(old, value));
    }
    Ok(item)
}

/// kube's ERROR event: a Status with the reason.
fn error_item(err: &crate::storage::StorageError) -> WatchItem {
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("Internal error occurred: {err}"), "reason": "InternalError", "code": 500});
    WatchItem {
        kind: EventType::Error,
        object: Arc::new(Object::from_value(status)),
        previous: None,
    }
}
