//! Where a node's kubelet listens, as kube-apiserver finds it: the first
//! of the Node's `status.addresses` in the order of
//! `--kubelet-preferred-address-types` (a DNS name only if it resolves),
//! on the port of `status.daemonEndpoints.kubeletEndpoint`.

use std::time::Duration;

use serde_json::Value;

use crate::aggregator::resolve::Backend;

/// The kubelet's port when a Node does not say (kube's default).
pub const DEFAULT_KUBELET_PORT: u16 = 10250;

/// How long a name may take to resolve before the next type is tried.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(1);

/// A Node address's type, kube's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressType {
    Hostname,
    InternalDns,
    InternalIp,
    ExternalDns,
    ExternalIp,
}

impl AddressType {
    const ALL: [AddressType; 5] = [
        AddressType::Hostname,
        AddressType::InternalDns,
        AddressType::InternalIp,
        AddressType::ExternalDns,
        AddressType::ExternalIp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AddressType::Hostname => "Hostname",
            AddressType::InternalDns => "InternalDNS",
            AddressType::InternalIp => "InternalIP",
            AddressType::ExternalDns => "ExternalDNS",
            AddressType::ExternalIp => "ExternalIP",
        }
    }

    /// A name, not an address: used only if it resolves.
    fn is_name(self) -> bool {
        !matches!(self, AddressType::InternalIp | AddressType::ExternalIp)
    }

    /// `Hostname,InternalIP,...` into types; an unknown one is refused.
    pub fn parse_list(text: &str) -> Result<Vec<AddressType>, String> {
        let items = text.split(',').map(str::trim).filter(|s| !s.is_empty());
        let types = items.map(|item| {
            let found = AddressType::ALL.into_iter().find(|t| t.name() == item);
            found.ok_or_else(|| {
                let known: Vec<&str> = AddressType::ALL.iter().map(|t| t.name()).collect();
                format!(
                    "{item:?} is not an address type (one of {})",
                    known.join(", ")
                )
            })
        });
        let types = types.collect::<Result<Vec<_>, _>>()?;
        match types.is_empty() {
            true => Err("at least one address type is needed".into()),
            false => Ok(types),
        }
    }
}

/// Why a node's kubelet has no address; kube's words.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("no preferred addresses found; known addresses: [{}]", .known.join(" "))]
pub struct NoAddress {
    /// `{Type address}` for each address the Node lists.
    pub known: Vec<String>,
}

/// The kubelet of `node` (a Node object): its address and port, and the
/// name its serving certificate is checked against.
pub async fn kubelet_of(node: &Value, preferred: &[AddressType]) -> Result<Backend, NoAddress> {
    let addresses: Vec<(&str, &str)> = node["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| Some((a["type"].as_str()?, a["address"].as_str()?)))
        .collect();
    let port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)
        .unwrap_or(DEFAULT_KUBELET_PORT);
    for kind in preferred {
        let of_kind = addresses
            .iter()
            .filter(|(t, a)| *t == kind.name() && !a.is_empty());
        for (_, address) in of_kind {
            if kind.is_name() && !resolves(address, port).await {
                continue;
            }
            return Ok(Backend {
                address: join(address, port),
                server_name: address.to_string(),
            });
        }
    }
    let known = addresses.iter().map(|(t, a)| format!("{{{t} {a}}}"));
    Err(NoAddress {
        known: known.collect(),
    })
}

async fn resolves(name: &str, port: u16) -> bool {
    let lookup = tokio::net::lookup_host((name, port));
    match tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
        Ok(Ok(mut found)) => found.next().is_some(),
        _ => false,
    }
}

/// `host:port`, an IPv6 address in brackets.
fn join(host: &str, port: u16) -> String {
    match host.contains(':') {
        true => format!("[{host}]:{port}"),
        false => format!("{host}:{port}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(addresses: Value, port: Value) -> Value {
        json!({"status": {"addresses": addresses,
                          "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}})
    }

    #[tokio::test]
    async fn the_preferred_type_wins_and_a_name_that_does_not_resolve_is_skipped() {
        let addresses = json!([
            {"type": "Hostname", "address": "no-such-host.invalid"},
            {"type": "InternalIP", "address": "10.0.0.7"},
            {"type": "ExternalIP", "address": "192.0.2.1"},
        ]);
        let types = AddressType::parse_list(super::super::settings::DEFAULT_ADDRESS_TYPES).unwrap();
        let found = kubelet_of(&node(addresses.clone(), json!(10255)), &types)
            .await
            .unwrap();
        assert_eq!(found.address, "10.0.0.7:10255");
        assert_eq!(found.server_name, "10.0.0.7");
        let external = [AddressType::ExternalIp, AddressType::InternalIp];
        let found = kubelet_of(&node(addresses, json!(0)), &external)
            .await
            .unwrap();
        assert_eq!(found.address, "192.0.2.1:10250");
        let v6 = json!([{"type": "InternalIP", "address": "fd00::1"}]);
        let found = kubelet_of(&node(v6, json!(1)), &types).await.unwrap();
        assert_eq!(found.address, "[fd00::1]:1");
    }

    #[tokio::test]
    async fn a_node_without_a_preferred_address_says_what_it_has() {
        let addresses = json!([{"type": "ExternalIP", "address": "192.0.2.1"}]);
        let err = kubelet_of(&node(addresses, json!(1)), &[AddressType::InternalIp])
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "no preferred addresses found; known addresses: [{ExternalIP 192.0.2.1}]"
        );
    }
}
