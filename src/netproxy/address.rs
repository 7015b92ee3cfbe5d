//! What an IP address is, for the proxy: public, private (loopback,
//! RFC 1918, carrier-grade NAT, unique-local IPv6, unspecified), or
//! forbidden whatever the lists say (link-local, which holds the cloud
//! metadata endpoints, and broadcast/multicast).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The class of an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Reachable when the host is allowed.
    Public,
    /// Reachable only when listed exactly.
    Private,
    /// Never reachable through the proxy.
    Forbidden,
}

fn v4(ip: Ipv4Addr) -> Kind {
    let o = ip.octets();
    if ip.is_link_local() || ip.is_broadcast() || ip.is_multicast() {
        return Kind::Forbidden;
    }
    if ip.is_loopback()
        || ip.is_private()
        || ip.is_unspecified()
        || o[0] == 0
        || (o[0] == 100 && (64..128).contains(&o[1]))
    {
        return Kind::Private;
    }
    Kind::Public
}

fn v6(ip: Ipv6Addr) -> Kind {
    if let Some(mapped) = ip.to_ipv4_mapped() {
        return v4(mapped);
    }
    let first = ip.segments()[0];
    if (first & 0xffc0) == 0xfe80 || ip.is_multicast() {
        return Kind::Forbidden;
    }
    if ip.is_loopback() || ip.is_unspecified() || (first & 0xfe00) == 0xfc00 {
        return Kind::Private;
    }
    Kind::Public
}

/// The class of `ip`.
pub fn kind(ip: IpAddr) -> Kind {
    match ip {
        IpAddr::V4(a) => v4(a),
        IpAddr::V6(a) => v6(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_classified() {
        let k = |s: &str| kind(s.parse().unwrap());
        assert_eq!(k("169.254.169.254"), Kind::Forbidden);
        assert_eq!(k("fe80::1"), Kind::Forbidden);
        assert_eq!(k("::ffff:169.254.169.254"), Kind::Forbidden);
        assert_eq!(k("127.0.0.1"), Kind::Private);
        assert_eq!(k("::1"), Kind::Private);
        assert_eq!(k("10.0.0.1"), Kind::Private);
        assert_eq!(k("172.20.0.1"), Kind::Private);
        assert_eq!(k("192.168.1.1"), Kind::Private);
        assert_eq!(k("100.100.0.1"), Kind::Private);
        assert_eq!(k("fd00::1"), Kind::Private);
        assert_eq!(k("0.0.0.0"), Kind::Private);
        assert_eq!(k("::ffff:10.0.0.1"), Kind::Private);
        assert_eq!(k("93.184.216.34"), Kind::Public);
        assert_eq!(k("2606:2800:220:1::1"), Kind::Public);
    }
}
