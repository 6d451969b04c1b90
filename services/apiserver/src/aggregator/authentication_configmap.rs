//! kube-system/extension-apiserver-authentication: what an extension API
//! server needs to authenticate the requests this server sends it and
//! its own clients (kube's ClusterAuthenticationTrustController): the
//! client CA, the front-proxy CA, and the requestheader settings, each
//! list as a JSON array as kube writes them.

use serde_json::{json, Map, Value};

use super::settings::{list, Settings};
use crate::error::ApiError;
use crate::registry::flow::Part;
use crate::registry::options::WriteOptions;
use crate::registry::requests;
use crate::registry::Catalog;

pub const NAMESPACE: &str = "kube-system";
pub const NAME: &str = "extension-apiserver-authentication";
const MANAGER: &str = "kube-apiserver";

/// The ConfigMap's data from the flags and the CA files' contents
/// (missing files are left out, as kube leaves out unset CAs).
pub fn data(settings: &Settings, client_ca: Option<&str>) -> Map<String, Value> {
    let mut data = Map::new();
    if let Some(ca) = client_ca {
        data.insert("client-ca-file".into(), json!(ca));
    }
    let front_proxy_ca = std::fs::read_to_string(&settings.requestheader_client_ca_file);
    let Ok(front_proxy_ca) = front_proxy_ca else {
        return data;
    };
    data.insert("requestheader-client-ca-file".into(), json!(front_proxy_ca));
    let lists = [
        (
            "requestheader-username-headers",
            &settings.requestheader_username_headers,
        ),
        (
            "requestheader-group-headers",
            &settings.requestheader_group_headers,
        ),
        (
            "requestheader-extra-headers-prefix",
            &settings.requestheader_extra_headers_prefix,
        ),
        (
            "requestheader-allowed-names",
            &settings.requestheader_allowed_names,
        ),
    ];
    for (key, value) in lists {
        data.insert(key.into(), json!(json!(list(value)).to_string()));
    }
    data
}

/// Creates the ConfigMap, or brings its data up to date.
pub async fn publish(catalog: &Catalog, data: Map<String, Value>) -> Result<(), ApiError> {
    let configmaps = catalog
        .find("", "v1", "configmaps")
        .ok_or_else(|| ApiError::Internal("configmaps are not served".into()))?;
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": NAMESPACE}, "data": data});
    let create = requests::Create {
        namespace: NAMESPACE.into(),
        body,
        options: WriteOptions::by(MANAGER),
    };
    match configmaps.call(create).await {
        Ok(_) => return Ok(()),
        Err(ApiError::AlreadyExists(_)) => {}
        Err(err) => return Err(err),
    }
    let get = requests::Get {
        namespace: NAMESPACE.into(),
        name: NAME.into(),
        part: Part::Main,
        resource_version: None,
    };
    let mut current = configmaps.call(get).await?;
    if current["data"] == Value::Object(data.clone()) {
        return Ok(());
    }
    current["data"] = Value::Object(data);
    let update = requests::Update {
        namespace: NAMESPACE.into(),
        name: NAME.into(),
        part: Part::Main,
        body: current,
        options: WriteOptions::by(MANAGER),
    };
    configmaps.call(update).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_json_arrays_and_cas_are_their_pem() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("front-proxy-ca.crt");
        std::fs::write(&ca, "PEM").unwrap();
        let settings = Settings {
            requestheader_client_ca_file: ca.display().to_string(),
            requestheader_username_headers: "X-Remote-User".into(),
            requestheader_group_headers: "X-Remote-Group".into(),
            requestheader_extra_headers_prefix: "X-Remote-Extra-".into(),
            requestheader_allowed_names: "front-proxy-client,other".into(),
            ..Settings::default()
        };
        let data = data(&settings, Some("CLIENT"));
        assert_eq!(data["client-ca-file"], "CLIENT");
        assert_eq!(data["requestheader-client-ca-file"], "PEM");
        assert_eq!(
            data["requestheader-username-headers"],
            r#"["X-Remote-User"]"#
        );
        assert_eq!(
            data["requestheader-allowed-names"],
            r#"["front-proxy-client","other"]"#
        );
        let none = super::data(&Settings::default(), None);
        assert!(none.is_empty());
    }
}
