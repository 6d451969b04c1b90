//! The ranges a Service's unique values come from: cluster IPs from the
//! service network and node ports from the node port range, with the
//! defaults kubeadm gives kube-apiserver (`--service-cluster-ip-range
//! 10.96.0.0/12`, `--service-node-port-range 30000-32767`). The first
//! address is the `kubernetes` service's.

use std::net::Ipv4Addr;
use std::ops::RangeInclusive;

const NETWORK: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 0);
const PREFIX_LEN: u32 = 12;
pub const NODE_PORTS: RangeInclusive<i64> = 30000..=32767;

pub const CIDR: &str = "10.96.0.0/12";

fn host_bits() -> u32 {
    32 - PREFIX_LEN
}

fn base() -> u32 {
    u32::from(NETWORK)
}

/// Whether `ip` is a usable address of the service network (not the
/// network or broadcast address).
pub fn in_range(ip: &str) -> bool {
    let Ok(ip) = ip.parse::<Ipv4Addr>() else {
        return false;
    };
    let offset = u32::from(ip).wrapping_sub(base());
    offset >= 1 && offset < (1 << host_bits()) - 1
}

/// The address reserved for the `kubernetes` service.
pub fn first_ip() -> String {
    Ipv4Addr::from(base() + 1).to_string()
}

/// A random address of the range, never the reserved first one.
pub fn pick_ip() -> String {
    let offset = rand::random_range(2..(1u32 << host_bits()) - 1);
    Ipv4Addr::from(base() + offset).to_string()
}

/// A random node port not in `avoid`.
pub fn pick_node_port(avoid: &[i64]) -> i64 {
    loop {
        let port = rand::random_range(NODE_PORTS);
        if !avoid.contains(&port) {
            return port;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_stay_inside_the_ranges() {
        for _ in 0..1000 {
            let ip = pick_ip();
            assert!(in_range(&ip), "{ip}");
            assert_ne!(ip, first_ip());
            assert!(NODE_PORTS.contains(&pick_node_port(&[30000])));
        }
        assert!(in_range("10.96.0.1"));
        assert!(in_range("10.111.255.254"));
        assert!(!in_range("10.96.0.0"));
        assert!(!in_range("10.111.255.255"));
        assert!(!in_range("10.112.0.1"));
        assert!(!in_range("192.168.0.1"));
        assert!(!in_range("not an ip"));
    }
}
