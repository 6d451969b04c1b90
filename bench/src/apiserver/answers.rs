//! The objects the workloads send and the checks of what comes back: a
//! get returns the object that was created, a create is answered 201
//! with a resourceVersion, a consistent list holds every object.

use std::collections::BTreeMap;

use bytes::Bytes;
use hyper::StatusCode;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::json;

use super::error::WrongAnswer;
use super::http::Answer;

/// Every ConfigMap carries this much data, so a list of 1,000 is about
/// 300 KB of JSON, like a namespace of small real ConfigMaps.
const PAYLOAD_BYTES: usize = 200;

pub fn payload(name: &str) -> String {
    // Derived from the name, so a get that returned another object's data
    // is caught.
    let seed = format!("{name}:");
    seed.repeat(PAYLOAD_BYTES / seed.len() + 1)[..PAYLOAD_BYTES].to_string()
}

pub fn configmap(name: &str) -> Bytes {
    let body = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"payload": payload(name)},
    });
    Bytes::from(body.to_string())
}

pub fn namespace(name: &str) -> Bytes {
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    Bytes::from(body.to_string())
}

#[derive(Deserialize)]
struct Meta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default, rename = "resourceVersion")]
    resource_version: String,
}

#[derive(Deserialize)]
struct Object {
    metadata: Meta,
    #[serde(default)]
    data: BTreeMap<String, String>,
}

/// A list whose items are skipped, not built: the list workload checks
/// sizes without spending the CPU it measures on building 1,000 maps.
#[derive(Deserialize)]
struct CountedList {
    metadata: Meta,
    items: Vec<IgnoredAny>,
}

#[derive(Deserialize)]
struct NamedList {
    items: Vec<Object>,
}

pub fn expect_status(answer: &Answer, want: StatusCode) -> Result<(), WrongAnswer> {
    if answer.status == want {
        return Ok(());
    }
    let body = String::from_utf8_lossy(&answer.body);
    Err(WrongAnswer::Status {
        got: answer.status,
        want,
        body: body.chars().take(300).collect(),
    })
}

fn expect_field(field: &'static str, got: &str, want: &str) -> Result<(), WrongAnswer> {
    match got == want {
        true => Ok(()),
        false => Err(WrongAnswer::Field {
            field,
            got: got.to_string(),
            want: want.to_string(),
        }),
    }
}

fn expect_version(version: &str) -> Result<(), WrongAnswer> {
    match version.is_empty() {
        true => Err(WrongAnswer::Field {
            field: "metadata.resourceVersion",
            got: String::new(),
            want: "a resourceVersion".into(),
        }),
        false => Ok(()),
    }
}

/// A get: 200 and the object `name` in `namespace`, with its data.
pub fn check_get(answer: &Answer, namespace: &str, name: &str) -> Result<(), WrongAnswer> {
    expect_status(answer, StatusCode::OK)?;
    let object: Object = serde_json::from_slice(&answer.body)?;
    expect_field("metadata.name", &object.metadata.name, name)?;
    expect_field("metadata.namespace", &object.metadata.namespace, namespace)?;
    let data = object.data.get("payload").map_or("", String::as_str);
    expect_field("data.payload", data, &payload(name))
}

/// A create: 201, the object named as asked, and its resourceVersion.
pub fn check_create(answer: &Answer, name: &str) -> Result<String, WrongAnswer> {
    expect_status(answer, StatusCode::CREATED)?;
    let object: Object = serde_json::from_slice(&answer.body)?;
    expect_field("metadata.name", &object.metadata.name, name)?;
    expect_version(&object.metadata.resource_version)?;
    Ok(object.metadata.resource_version)
}

/// A list: 200, a list resourceVersion (it was a consistent read), and at
/// least `want` items; the number of items.
pub fn check_list(answer: &Answer, want: usize) -> Result<usize, WrongAnswer> {
    expect_status(answer, StatusCode::OK)?;
    let list: CountedList = serde_json::from_slice(&answer.body)?;
    expect_version(&list.metadata.resource_version)?;
    let items = list.items.len();
    match items >= want {
        true => Ok(items),
        false => Err(WrongAnswer::Field {
            field: "the number of items",
            got: items.to_string(),
            want: format!("at least {want}"),
        }),
    }
}

/// The names in a list answer.
pub fn list_names(answer: &Answer) -> Result<Vec<String>, WrongAnswer> {
    expect_status(answer, StatusCode::OK)?;
    let list: NamedList = serde_json::from_slice(&answer.body)?;
    Ok(list.items.into_iter().map(|o| o.metadata.name).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: serde_json::Value) -> Answer {
        Answer {
            status: StatusCode::from_u16(status).unwrap(),
            body: Bytes::from(body.to_string()),
        }
    }

    fn object(name: &str, rv: &str) -> serde_json::Value {
        json!({"metadata": {"name": name, "namespace": "default", "resourceVersion": rv},
               "data": {"payload": payload(name)}})
    }

    #[test]
    fn payloads_differ_by_name_and_have_the_set_size() {
        assert_eq!(payload("a").len(), PAYLOAD_BYTES);
        assert_ne!(payload("item-1"), payload("item-2"));
    }

    #[test]
    fn gets_are_checked_for_the_object_and_its_data() {
        assert!(check_get(&answer(200, object("t", "5")), "default", "t").is_ok());
        assert!(check_get(&answer(200, object("u", "5")), "default", "t").is_err());
        assert!(check_get(&answer(404, object("t", "5")), "default", "t").is_err());
        let mut other = object("t", "5");
        other["data"]["payload"] = json!(payload("u"));
        assert!(check_get(&answer(200, other), "default", "t").is_err());
    }

    #[test]
    fn creates_need_201_and_a_resource_version() {
        assert_eq!(
            check_create(&answer(201, object("c", "7")), "c").unwrap(),
            "7"
        );
        assert!(check_create(&answer(201, object("c", "")), "c").is_err());
        assert!(check_create(&answer(200, object("c", "7")), "c").is_err());
        assert!(check_create(&answer(409, json!({"kind": "Status"})), "c").is_err());
    }

    #[test]
    fn lists_need_enough_items_and_a_resource_version() {
        let list = |n: usize, rv: &str| {
            let items: Vec<_> = (0..n).map(|i| object(&format!("i{i}"), "3")).collect();
            answer(
                200,
                json!({"metadata": {"resourceVersion": rv}, "items": items}),
            )
        };
        assert_eq!(check_list(&list(3, "9"), 3).unwrap(), 3);
        assert!(check_list(&list(2, "9"), 3).is_err());
        assert!(check_list(&list(3, ""), 3).is_err());
        assert_eq!(list_names(&list(2, "9")).unwrap(), vec!["i0", "i1"]);
    }
}
