use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::json;

use super::*;
use crate::testkit::object;

fn template(image: &str) -> PodTemplateSpec {
    object(json!({
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": image}]},
    }))
}

fn owner() -> StatefulSet {
    object(json!({"metadata": {"name": "web", "namespace": "default", "uid": "u1"}}))
}

#[test]
fn the_data_is_a_replacing_patch_that_gives_the_template_back() {
    let data = patch_of(&template("nginx:1"));
    assert_eq!(data["spec"]["template"]["$patch"], "replace");
    let revision = revision_for(&owner(), &template("nginx:1"), 3);
    assert_eq!(template_of(&revision), Some(template("nginx:1")));
    assert_eq!(revision.revision, 3);
    assert_eq!(revision.metadata.labels.as_ref().unwrap()["app"], "web");
    assert_eq!(revision.metadata.owner_references.unwrap()[0].uid, "u1");
}

#[test]
fn the_hash_follows_the_data_and_the_collision_count() {
    let a = patch_of(&template("nginx:1"));
    let b = patch_of(&template("nginx:2"));
    assert_eq!(hash(&a, None), hash(&a, None));
    assert_ne!(hash(&a, None), hash(&b, None));
    assert_ne!(hash(&a, Some(0)), hash(&a, Some(1)));
    let spelled = hash(&a, None);
    assert!(spelled
        .chars()
        .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
}

fn numbered(name: &str, number: i64) -> ControllerRevision {
    let mut revision = revision_for(&owner(), &template(name), number);
    revision.metadata.name = Some(name.into());
    revision
}

#[test]
fn numbering_and_truncation_keep_what_is_live() {
    let mut revisions = vec![numbered("c", 3), numbered("a", 1), numbered("b", 2)];
    sort(&mut revisions);
    let names: Vec<_> = revisions
        .iter()
        .map(|r| r.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(next_number(&revisions), 4);
    assert_eq!(next_number(&[]), 1);
    let live = |r: &ControllerRevision| r.metadata.name.as_deref() == Some("c");
    let doomed: Vec<_> = to_truncate(&revisions, &live, 1)
        .iter()
        .map(|r| r.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(doomed, ["a"]);
    assert!(to_truncate(&revisions, &live, 2).is_empty());
    assert_eq!(to_truncate(&revisions, &live, 0).len(), 2);
}
