//! `widgets/<name>/polish`: marks a widget polished (a compare-and-swap
//! on its storage, as a pod's binding is) and answers with the widget.

use futures::future::BoxFuture;
use serde_json::Value;

use crate::error::ApiError;
use crate::registry::storage_errors::{self, Reading};
use crate::registry::subresource::{Answer, Call, Handler, Serve, Subresource};
use crate::storage::{GuaranteedUpdate, Preconditions, StorageError};

pub const POLISH: Subresource = Subresource {
    name: "polish",
    response: None,
    verbs: &["create"],
    serve: Serve::Create(&Polish),
    collection: Some("polishings"),
};

pub struct Polish;

impl Handler for Polish {
    fn serve<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Answer, ApiError>> {
        Box::pin(async move {
            let shine = call
                .body
                .as_ref()
                .map_or(Value::Null, |b| b["shine"].clone());
            let none = Preconditions::default();
            let polished = call
                .store
                .guaranteed_update::<StorageError, _, _, Value>(&call.key, &none, |mut current| {
                    current.object["metadata"]["annotations"]["polished"] = shine.clone();
                    async move { Ok(current.object) }
                })
                .await
                .map_err(|e| storage_errors::api_error(e, call.target.clone(), Reading::Plain))?;
            Ok(Answer {
                code: 201,
                body: polished.object,
            })
        })
    }
}
