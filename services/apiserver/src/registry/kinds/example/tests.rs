//! The example kind's subresource, run as the routes run it.

use std::sync::Arc;

use serde_json::{json, Value};

use super::widgets::{handle, DEF};
use crate::admission::objects::{Freshness, Lookup, Objects, Resource};
use crate::registry::actor::ResourceActor;
use crate::registry::options::{Query, WriteOptions};
use crate::registry::requests::{self, Request};
use crate::registry::subresource::{Serve, Services};

/// No other kinds: the polish needs none.
struct Nothing;

impl Objects for Nothing {
    fn get<'a>(
        &'a self,
        _: Resource,
        _: &'a str,
        _: &'a str,
        _: Freshness,
    ) -> Lookup<'a, Option<Value>> {
        Box::pin(async { Ok(None) })
    }
    fn list<'a>(&'a self, _: Resource, _: &'a str, _: Freshness) -> Lookup<'a, Vec<Value>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    fn swap<'a>(&'a self, _: Resource, _: &'a Value) -> Lookup<'a, bool> {
        Box::pin(async { Ok(false) })
    }
}

#[actix_rt::test]
async fn the_kinds_own_subresource_runs_from_its_table() {
    let handle = handle();
    let (_actor, handle) = ResourceActor::start(handle, &actix::Arbiter::current())
        .await
        .unwrap();
    let create = requests::Create {
        namespace: "default".into(),
        body: json!({"apiVersion": "example.capstan.dev/v1", "kind": "Widget",
                     "metadata": {"name": "w"}}),
        options: WriteOptions::default(),
    };
    create.run(&handle).await.unwrap();
    let polish = DEF.subresource("polish").unwrap();
    let Serve::Create(handler) = polish.serve else {
        panic!("polish reads a body");
    };
    let request = requests::SubresourceRequest {
        namespace: "default".into(),
        name: "w".into(),
        verb: "create",
        body: Some(json!({"shine": "bright"})),
        query: Query::default(),
        pairs: Vec::new(),
        options: WriteOptions::default(),
        services: Arc::new(Services {
            objects: Arc::new(Nothing),
            issuer: None,
        }),
    };
    let serve = requests::Serve { handler, request };
    let answer = serve.run(&handle).await.unwrap();
    assert_eq!(answer.code, 201);
    assert_eq!(answer.body["metadata"]["annotations"]["polished"], "bright");
}
