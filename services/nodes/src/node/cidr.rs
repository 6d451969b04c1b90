//! Addresses: each node's pod CIDR carved from the process's cluster CIDR
//! (the node IPAM controller's range allocator, done by the nodes
//! themselves since they register with it), and each pod's IP from its
//! node's CIDR (host-local IPAM: the network and gateway addresses are
//! skipped, and freed addresses are reused last).

use std::collections::{BTreeSet, HashMap};
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

/// A cluster CIDR that cannot be carved as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    #[error("--cluster-cidr {0:?} is not an IPv4 CIDR such as 10.244.0.0/16")]
    Parse(String),
    #[error("--node-cidr-mask-size {mask} must be longer than the cluster CIDR's /{cluster} and at most /30")]
    Mask { mask: u8, cluster: u8 },
}

/// The subnets one process gives its nodes.
#[derive(Debug, Clone)]
pub struct ClusterCidr {
    cluster: Ipv4Net,
    mask: u8,
}

impl ClusterCidr {
    pub fn new(cluster: &str, mask: u8) -> Result<ClusterCidr, CidrError> {
        let cluster: Ipv4Net = cluster
            .trim()
            .parse()
            .map_err(|_| CidrError::Parse(cluster.to_string()))?;
        if mask <= cluster.prefix_len() || mask > 30 {
            return Err(CidrError::Mask {
                mask,
                cluster: cluster.prefix_len(),
            });
        }
        Ok(ClusterCidr {
            cluster: cluster.trunc(),
            mask,
        })
    }

    /// Whether `net` is one of this range's node subnets.
    pub fn contains(&self, net: &Ipv4Net) -> bool {
        net.prefix_len() == self.mask && self.cluster.contains(net)
    }

    /// Up to `count` subnets not in `used`, lowest first.
    pub fn free(&self, used: &BTreeSet<Ipv4Net>, count: usize) -> Vec<Ipv4Net> {
        self.cluster
            .subnets(self.mask)
            .into_iter()
            .flatten()
            .filter(|net| !used.contains(net))
            .take(count)
            .collect()
    }
}

/// One node's pod addresses.
#[derive(Debug, Clone)]
pub struct PodAddresses {
    /// The usable host numbers, as offsets from the network address.
    first: u32,
    last: u32,
    network: u32,
    /// Where the next search starts, so a freed address is reused last.
    cursor: u32,
    by_pod: HashMap<String, u32>,
    taken: BTreeSet<u32>,
}

impl PodAddresses {
    pub fn new(net: Ipv4Net) -> PodAddresses {
        let network = u32::from(net.network());
        let hosts = 1u32 << (32 - u32::from(net.prefix_len()));
        // .0 is the network, .1 the node's bridge, the last the broadcast.
        PodAddresses {
            first: 2,
            last: hosts.saturating_sub(2),
            network,
            cursor: 2,
            by_pod: HashMap::new(),
            taken: BTreeSet::new(),
        }
    }

    /// The pod's address: the one it has, or the next free one.
    pub fn assign(&mut self, pod_uid: &str) -> Option<Ipv4Addr> {
        if let Some(offset) = self.by_pod.get(pod_uid) {
            return Some(Ipv4Addr::from(self.network + offset));
        }
        let span = self.last.checked_sub(self.first)? + 1;
        let offset = (0..span)
            .map(|i| self.first + (self.cursor - self.first + i) % span)
            .find(|o| !self.taken.contains(o))?;
        self.cursor = if offset == self.last {
            self.first
        } else {
            offset + 1
        };
        self.taken.insert(offset);
        self.by_pod.insert(pod_uid.to_string(), offset);
        Some(Ipv4Addr::from(self.network + offset))
    }

    /// Records an address a pod already has (after a restart); an address
    /// outside the range, or taken by another pod, is not recorded.
    pub fn restore(&mut self, pod_uid: &str, ip: &str) -> bool {
        let Ok(ip) = ip.parse::<Ipv4Addr>() else {
            return false;
        };
        let Some(offset) = u32::from(ip).checked_sub(self.network) else {
            return false;
        };
        if offset < self.first || offset > self.last || self.taken.contains(&offset) {
            return false;
        }
        self.taken.insert(offset);
        self.by_pod.insert(pod_uid.to_string(), offset);
        true
    }

    /// Frees the pod's address.
    pub fn release(&mut self, pod_uid: &str) {
        if let Some(offset) = self.by_pod.remove(pod_uid) {
            self.taken.remove(&offset);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_subnets_skip_the_used_ones() {
        let range = ClusterCidr::new("10.244.0.0/16", 24).unwrap();
        let used = BTreeSet::from([
            "10.244.0.0/24".parse().unwrap(),
            "10.244.2.0/24".parse().unwrap(),
        ]);
        let free: Vec<String> = range.free(&used, 2).iter().map(|n| n.to_string()).collect();
        assert_eq!(free, ["10.244.1.0/24", "10.244.3.0/24"]);
        assert_eq!(range.free(&BTreeSet::new(), 1000).len(), 256);
        assert!(range.contains(&"10.244.9.0/24".parse().unwrap()));
        assert!(!range.contains(&"10.245.9.0/24".parse().unwrap()));
    }

    #[test]
    fn bad_ranges_are_refused() {
        assert!(matches!(
            ClusterCidr::new("10.244.0.0", 24),
            Err(CidrError::Parse(_))
        ));
        assert!(matches!(
            ClusterCidr::new("10.244.0.0/16", 16),
            Err(CidrError::Mask { .. })
        ));
        assert!(matches!(
            ClusterCidr::new("10.244.0.0/16", 31),
            Err(CidrError::Mask { .. })
        ));
    }

    #[test]
    fn pod_addresses_are_handed_out_and_reused_last() {
        let mut ips = PodAddresses::new("10.244.1.0/29".parse().unwrap());
        let got: Vec<String> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|p| ips.assign(p).unwrap().to_string())
            .collect();
        assert_eq!(
            got,
            [
                "10.244.1.2",
                "10.244.1.3",
                "10.244.1.4",
                "10.244.1.5",
                "10.244.1.6"
            ]
        );
        assert_eq!(ips.assign("f"), None, "a /29 holds five pods");
        assert_eq!(ips.assign("a").unwrap().to_string(), "10.244.1.2");
        ips.release("b");
        assert_eq!(ips.assign("f").unwrap().to_string(), "10.244.1.3");
    }

    #[test]
    fn addresses_are_restored_after_a_restart() {
        let mut ips = PodAddresses::new("10.244.1.0/24".parse().unwrap());
        assert!(ips.restore("a", "10.244.1.2"));
        assert!(!ips.restore("b", "10.244.1.2"), "taken");
        assert!(!ips.restore("c", "10.9.9.9"), "outside");
        assert_eq!(ips.assign("d").unwrap().to_string(), "10.244.1.3");
    }
}
