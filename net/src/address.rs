//! What an IP address is, for deciding whether a fetch may connect to it.
//!
//! Addresses that embed an IPv4 address (IPv4-mapped `::ffff:a.b.c.d`, NAT64
//! `64:ff9b::/96`, 6to4 `2002::/16`) are judged by the IPv4 address inside, so none of
//! them is a way around the IPv4 rules.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The class of an address, from most to least dangerous.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// Cloud metadata and credential endpoints (and all of IPv4 link-local, where they
    /// live): never reachable, whatever the settings.
    Metadata,
    /// Not on the public internet: reachable only with `security.allow_private_urls`.
    /// The text names the range (`loopback`, `private`, `carrier-grade NAT`, ...).
    Private(&'static str),
    Public,
}

/// The class of `ip`.
pub fn classify(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    (u32::from(ip) & mask) == (u32::from(Ipv4Addr::from(net)) & mask)
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    use AddressClass::*;
    if in_v4(ip, [169, 254, 0, 0], 16) || ip == Ipv4Addr::new(100, 100, 100, 200) {
        return Metadata;
    }
    const RANGES: &[([u8; 4], u32, &str)] = &[
        ([0, 0, 0, 0], 8, "unspecified"),
        ([127, 0, 0, 0], 8, "loopback"),
        ([10, 0, 0, 0], 8, "private"),
        ([172, 16, 0, 0], 12, "private"),
        ([192, 168, 0, 0], 16, "private"),
        ([100, 64, 0, 0], 10, "carrier-grade NAT"),
        ([192, 0, 0, 0], 24, "reserved"),
        ([192, 0, 2, 0], 24, "documentation"),
        ([198, 51, 100, 0], 24, "documentation"),
        ([203, 0, 113, 0], 24, "documentation"),
        ([198, 18, 0, 0], 15, "benchmarking"),
        ([224, 0, 0, 0], 4, "multicast"),
        ([240, 0, 0, 0], 4, "reserved"),
    ];
    RANGES
        .iter()
        .find(|(net, prefix, _)| in_v4(ip, *net, *prefix))
        .map_or(Public, |(_, _, kind)| Private(kind))
}

fn in_v6(ip: Ipv6Addr, net: [u16; 8], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    (u128::from(ip) & mask) == (u128::from(Ipv6Addr::from(net)) & mask)
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    use AddressClass::*;
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    let bits = u128::from(ip);
    if in_v6(ip, [0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96) {
        return classify_v4(Ipv4Addr::from(bits as u32));
    }
    if in_v6(ip, [0x2002, 0, 0, 0, 0, 0, 0, 0], 16) {
        return classify_v4(Ipv4Addr::from((bits >> 80) as u32));
    }
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        return Metadata;
    }
    if ip.is_unspecified() {
        return Private("unspecified");
    }
    if ip.is_loopback() {
        return Private("loopback");
    }
    const RANGES: &[([u16; 8], u32, &str)] = &[
        ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "private"),
        ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "link-local"),
        ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, "private"),
        ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "multicast"),
        ([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, "documentation"),
        ([0x2001, 0, 0, 0, 0, 0, 0, 0], 23, "reserved"),
        ([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, "private"),
        ([0x100, 0, 0, 0, 0, 0, 0, 0], 64, "reserved"),
    ];
    if let Some((_, _, kind)) = RANGES
        .iter()
        .find(|(net, prefix, _)| in_v6(ip, *net, *prefix))
    {
        return Private(kind);
    }
    // Global unicast is 2000::/3; everything else is reserved or special-purpose
    // (IPv4-compatible `::a.b.c.d` included).
    if in_v6(ip, [0x2000, 0, 0, 0, 0, 0, 0, 0], 3) {
        Public
    } else {
        Private("reserved")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(text: &str) -> AddressClass {
        classify(text.parse().unwrap())
    }

    #[test]
    fn private_ranges_are_private() {
        for ip in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "0.0.0.0",
            "224.0.0.1",
            "100.64.0.1",
            "100.127.255.255",
            "198.18.0.23",
            "255.255.255.255",
            "::1",
            "::",
            "fd12::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "64:ff9b::7f00:1",
            "2002:7f00:1::",
            "::127.0.0.1",
            "2001:db8::1",
        ] {
            assert!(
                matches!(class(ip), AddressClass::Private(_)),
                "{ip} should be private, got {:?}",
                class(ip)
            );
        }
    }

    #[test]
    fn metadata_addresses_in_every_spelling() {
        for ip in [
            "169.254.169.254",
            "169.254.170.2",
            "169.254.169.253",
            "169.254.42.1",
            "100.100.100.200",
            "fd00:ec2::254",
            "::ffff:169.254.169.254",
            "::ffff:100.100.100.200",
            "64:ff9b::a9fe:a9fe",
            "2002:a9fe:a9fe::1",
        ] {
            assert_eq!(class(ip), AddressClass::Metadata, "{ip}");
        }
    }

    #[test]
    fn public_addresses_are_public() {
        for ip in ["93.184.216.34", "100.0.0.1", "8.8.8.8", "2606:4700::1"] {
            assert_eq!(class(ip), AddressClass::Public, "{ip}");
        }
    }
}
