//! An operator written with kube-rs's controller runtime, run against
//! `capstan-apiserver` on both backends: a CRD made by the test
//! (`greetings.ops.example.com`, with a status subresource), a
//! `Controller` over its objects that owns ConfigMaps, and a reconciler
//! behind kube-rs's `finalizer` helper. Applying a Greeting makes its
//! ConfigMap (owner reference to the Greeting, server-side applied) and
//! writes the Greeting's status through `/status`; changing the spec
//! updates both; deleting the Greeting runs the finalizer's cleanup, the
//! Greeting goes once the finalizer is removed, and the garbage collector
//! takes the ConfigMap.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{finalizer, Event};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::{json, Value};

use capstan_tests::apiserver::{ApiCluster, Backend};
use capstan_tests::poll::{wait_for, wait_for_async};

const WAIT: Duration = Duration::from_secs(30);
const FINALIZER: &str = "greetings.ops.example.com/cleanup";
const MANAGER: &str = "greeting-operator";

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: greetings.ops.example.com}
spec:
  group: ops.example.com
  scope: Namespaced
  names: {plural: greetings, singular: greeting, kind: Greeting}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [message]
            properties:
              message: {type: string}
          status:
            type: object
            properties:
              configMap: {type: string}
              observedGeneration: {type: integer}
              message: {type: string}
"#;

fn greeting_type() -> ApiResource {
    let gvk = GroupVersionKind::gvk("ops.example.com", "v1", "Greeting");
    ApiResource::from_gvk_with_plural(&gvk, "greetings")
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Failed(String);

impl From<kube::Error> for Failed {
    fn from(err: kube::Error) -> Failed {
        Failed(err.to_string())
    }
}

/// What the reconciler shares: the client, and the names it cleaned up.
struct Operator {
    client: Client,
    cleaned: Mutex<Vec<String>>,
}

async fn reconcile(greeting: Arc<DynamicObject>, op: Arc<Operator>) -> Result<Action, Failed> {
    let namespace = greeting.namespace().unwrap_or_default();
    let greetings: Api<DynamicObject> =
        Api::namespaced_with(op.client.clone(), &namespace, &greeting_type());
    finalizer(&greetings, FINALIZER, greeting, |event| async {
        match event {
            Event::Apply(g) => apply(&op, &greetings, &g).await,
            Event::Cleanup(g) => {
                op.cleaned.lock().unwrap().push(g.name_any());
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e| Failed(e.to_string()))
}

/// The Greeting's ConfigMap, owned by it, then its status.
async fn apply(
    op: &Operator,
    greetings: &Api<DynamicObject>,
    greeting: &DynamicObject,
) -> Result<Action, Failed> {
    let name = greeting.name_any();
    let message = greeting.data["spec"]["message"]
        .as_str()
        .unwrap_or_default();
    let owner = greeting
        .controller_owner_ref(&greeting_type())
        .ok_or_else(|| Failed("a greeting without a uid".into()))?;
    let config_map = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("greeting-{name}")),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("message".into(), message.to_string())])),
        ..Default::default()
    };
    let config_maps: Api<ConfigMap> =
        Api::namespaced(op.client.clone(), &greeting.namespace().unwrap_or_default());
    let mut config_map_value =
        serde_json::to_value(&config_map).map_err(|e| Failed(e.to_string()))?;
    config_map_value["apiVersion"] = "v1".into();
    config_map_value["kind"] = "ConfigMap".into();
    let applied = PatchParams::apply(MANAGER).force();
    config_maps
        .patch(
            &format!("greeting-{name}"),
            &applied,
            &Patch::Apply(config_map_value),
        )
        .await?;
    let status = json!({"status": {
        "configMap": format!("greeting-{name}"),
        "observedGeneration": greeting.metadata.generation,
        "message": message,
    }});
    greetings
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
        .await?;
    Ok(Action::requeue(Duration::from_secs(300)))
}

fn error_policy(_: Arc<DynamicObject>, _: &Failed, _: Arc<Operator>) -> Action {
    Action::requeue(Duration::from_millis(200))
}

fn client(port: u16) -> Client {
    let mut config = capstan_tests::tls::kube_config(port);
    config.read_timeout = Some(Duration::from_secs(60));
    Client::try_from(config).expect("a kube client")
}

fn greeting(name: &str, message: &str) -> DynamicObject {
    let mut object = DynamicObject::new(name, &greeting_type());
    object.data = json!({"spec": {"message": message}});
    object
}

capstan_tests::on_both_backends!(
    async:
    an_operator_reconciles_a_custom_resource_and_its_finalizer_runs,
);

async fn an_operator_reconciles_a_custom_resource_and_its_finalizer_runs(backend: Backend) {
    let cluster = tokio::task::block_in_place(|| {
        let cluster = ApiCluster::start_on(backend);
        cluster.kubectl.ok_with_input(&["apply", "-f", "-"], CRD);
        wait_for(WAIT, "greetings to be served", || {
            let out = cluster.kubectl.run(&["get", "greetings"]);
            out.status.success().then_some(())
        });
        cluster
    });
    let client = client(cluster.port);
    let greetings: Api<DynamicObject> =
        Api::default_namespaced_with(client.clone(), &greeting_type());
    let config_maps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let operator = Arc::new(Operator {
        client: client.clone(),
        cleaned: Mutex::default(),
    });
    let controller = Controller::new_with(
        greetings.clone(),
        watcher::Config::default(),
        greeting_type(),
    )
    .owns(config_maps.clone(), watcher::Config::default())
    .run(reconcile, error_policy, operator.clone())
    // What the controller met, for a failure's output.
    .for_each(|result| async move {
        if let Err(err) = result {
            eprintln!("controller: {err:?}");
        }
    });
    let running = tokio::spawn(controller);

    let created = greetings
        .create(&PostParams::default(), &greeting("hello", "hi"))
        .await
        .unwrap();
    let uid = created.uid().expect("a uid");
    let status = wait_for_async(WAIT, "the greeting's status", || async {
        let g = greetings.get("hello").await.ok()?;
        (g.data["status"]["message"] == "hi").then_some(g)
    })
    .await;
    assert_eq!(status.data["status"]["configMap"], "greeting-hello");
    assert_eq!(status.finalizers(), [FINALIZER.to_string()]);
    assert_eq!(
        status.data["spec"]["message"], "hi",
        "status writes leave the spec"
    );
    let made = config_maps.get("greeting-hello").await.unwrap();
    assert_eq!(made.data.unwrap()["message"], "hi");
    let owners = made.metadata.owner_references.unwrap_or_default();
    assert_eq!(owners.len(), 1);
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].uid.as_str()),
        ("Greeting", uid.as_str())
    );
    assert_eq!(owners[0].controller, Some(true));
    let managers: Vec<String> = made
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(managers.contains(&MANAGER.to_string()), "{managers:?}");

    // A spec change: a new generation, reconciled into both.
    let change = json!({"spec": {"message": "hello again"}});
    greetings
        .patch("hello", &PatchParams::default(), &Patch::Merge(change))
        .await
        .unwrap();
    let changed = wait_for_async(WAIT, "the changed greeting reconciled", || async {
        let g = greetings.get("hello").await.ok()?;
        (g.data["status"]["message"] == "hello again").then_some(g)
    })
    .await;
    assert_eq!(changed.metadata.generation, Some(2));
    assert_eq!(changed.data["status"]["observedGeneration"], 2);
    let data = config_maps
        .get("greeting-hello")
        .await
        .unwrap()
        .data
        .unwrap();
    assert_eq!(data["message"], "hello again");

    // Deleting it: the finalizer's cleanup runs, then the Greeting and,
    // through the garbage collector, its ConfigMap go.
    greetings
        .delete("hello", &DeleteParams::default())
        .await
        .unwrap();
    wait_for_async(WAIT, "the greeting to go", || async {
        matches!(greetings.get_opt("hello").await, Ok(None)).then_some(())
    })
    .await;
    assert_eq!(*operator.cleaned.lock().unwrap(), ["hello"]);
    wait_for_async(
        WAIT,
        "the garbage collector to take the ConfigMap",
        || async { matches!(config_maps.get_opt("greeting-hello").await, Ok(None)).then_some(()) },
    )
    .await;
    running.abort();
    let kept: Value =
        serde_json::to_value(config_maps.list(&Default::default()).await.unwrap().items).unwrap();
    assert!(!kept.to_string().contains("greeting-"), "{kept}");
}
