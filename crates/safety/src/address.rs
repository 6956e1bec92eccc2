//! Which network addresses are private: loopback, private ranges,
//! link-local (cloud metadata at 169.254.169.254), unique-local IPv6, and
//! IPv4 addresses hidden inside IPv6 ones (`::ffff:127.0.0.1`).
//!
//! The operator policy (`blockPrivateNetwork`) refuses URLs whose host is,
//! or resolves to, one of these, so an API client cannot point the agent
//! at the machine it runs on or at its internal network.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs as _};

/// The kind of private address `ip` is (`"loopback"`, `"link-local"`…),
/// or `None` for a public one.
pub fn private_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => private_v4(v4),
        IpAddr::V6(v6) => private_v6(v6),
    }
}

/// Whether `ip` is private, loopback, link-local or otherwise not a public
/// internet address.
pub fn is_private(ip: IpAddr) -> bool {
    private_range(ip).is_some()
}

fn private_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    Some(match (a, b) {
        (127, _) => "loopback (127.0.0.0/8)",
        (10, _) => "private (10.0.0.0/8)",
        (172, 16..=31) => "private (172.16.0.0/12)",
        (192, 168) => "private (192.168.0.0/16)",
        (169, 254) => "link-local (169.254.0.0/16, cloud metadata)",
        // 0.0.0.0 reaches the local machine on Linux and macOS.
        (0, _) => "this host (0.0.0.0/8)",
        (100, 64..=127) => "shared address space (100.64.0.0/10)",
        (224..=255, _) => "multicast or reserved (224.0.0.0/3)",
        _ => return None,
    })
}

fn private_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = embedded_v4(ip) {
        return private_v4(v4);
    }
    let first = ip.segments()[0];
    if ip.is_loopback() {
        Some("loopback (::1)")
    } else if ip.is_unspecified() {
        Some("this host (::)")
    } else if first & 0xfe00 == 0xfc00 {
        Some("unique local (fc00::/7)")
    } else if first & 0xffc0 == 0xfe80 {
        Some("link-local (fe80::/10)")
    } else if first & 0xffc0 == 0xfec0 {
        Some("site-local (fec0::/10)")
    } else if first & 0xff00 == 0xff00 {
        Some("multicast (ff00::/8)")
    } else {
        None
    }
}

/// The IPv4 address carried by an IPv6 one: IPv4-mapped
/// (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), NAT64
/// (`64:ff9b::a.b.c.d`) and 6to4 (`2002:AABB:CCDD::`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, ..] => Some(tail),
        // `::` and `::1` are IPv6's own, not IPv4-compatible addresses.
        [0, 0, 0, 0, 0, 0, hi, _] if hi != 0 => Some(tail),
        [0x64, 0xff9b, 0, 0, 0, 0, ..] => Some(tail),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        )),
        _ => None,
    }
}

/// Whether `ip` is an address of this machine for the purpose of a port
/// rule: loopback or unspecified (`0.0.0.0`, `::`), also when mapped.
pub fn is_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_unspecified(),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => v4.is_loopback() || v4.is_unspecified(),
            None => v6.is_loopback() || v6.is_unspecified(),
        },
    }
}

/// Whether a host *name* always means this machine, whatever DNS says:
/// `localhost` and `*.localhost` (browsers resolve them to loopback
/// themselves).
pub fn is_localhost_name(host: &str) -> bool {
    let h = host.trim_end_matches('.').to_ascii_lowercase();
    h == "localhost" || h.ends_with(".localhost")
}

/// Resolves `host` (a DNS name) for port `port` with the system resolver.
/// Blocking: call it off the async threads (`spawn_blocking`).
pub fn resolve(host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    Ok((host, port).to_socket_addrs()?.collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn ipv4_ranges() {
        for private in [
            "10.0.0.1",
            "10.255.255.255",
            "172.16.0.1",
            "172.31.255.254",
            "192.168.1.1",
            "127.0.0.1",
            "127.8.9.10",
            "169.254.169.254",
            "169.254.0.1",
            "0.0.0.0",
            "100.64.0.1",
            "255.255.255.255",
            "224.0.0.1",
        ] {
            assert!(is_private(ip(private)), "{private} is private");
        }
        for public in [
            "8.8.8.8",
            "172.15.255.255",
            "172.32.0.1",
            "192.167.1.1",
            "11.0.0.1",
            "169.253.1.1",
            "100.128.0.1",
            "1.1.1.1",
        ] {
            assert!(!is_private(ip(public)), "{public} is public");
        }
        assert_eq!(
            private_range(ip("169.254.169.254")),
            Some("link-local (169.254.0.0/16, cloud metadata)")
        );
    }

    #[test]
    fn ipv6_ranges() {
        for private in [
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
        ] {
            assert!(is_private(ip(private)), "{private} is private");
        }
        for public in [
            "2001:4860:4860::8888",
            "2606:4700::1111",
            "fbff::1",
            "fe00::1",
        ] {
            assert!(!is_private(ip(public)), "{public} is public");
        }
    }

    #[test]
    fn ipv4_inside_ipv6_is_judged_as_ipv4() {
        for private in [
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.1.2.3",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "2002:c0a8:101::1",
        ] {
            assert!(is_private(ip(private)), "{private} is private");
        }
        for public in ["::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::"] {
            assert!(!is_private(ip(public)), "{public} is public");
        }
    }

    #[test]
    fn local_addresses_and_names() {
        for local in ["127.0.0.1", "0.0.0.0", "::1", "::", "::ffff:127.0.0.1"] {
            assert!(is_local(ip(local)), "{local}");
        }
        for other in ["10.0.0.1", "8.8.8.8", "fe80::1"] {
            assert!(!is_local(ip(other)), "{other}");
        }
        assert!(is_localhost_name("localhost"));
        assert!(is_localhost_name("LOCALHOST."));
        assert!(is_localhost_name("api.localhost"));
        assert!(!is_localhost_name("localhost.example.com"));
        assert!(!is_localhost_name("notlocalhost"));
    }
}
