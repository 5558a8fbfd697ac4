//! Address classification for safe-fetch: which IP addresses a pack may
//! never reach. Pure; every IPv6 form that embeds an IPv4 address is judged
//! by the embedded IPv4 address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is forbidden.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forbidden {
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// RFC 1918: `10/8`, `172.16/12`, `192.168/16`.
    Private,
    /// `169.254.0.0/16` (except the metadata address), `fe80::/10`.
    LinkLocal,
    /// `169.254.169.254`, `fd00:ec2::254`: cloud instance metadata.
    CloudMetadata,
    /// `100.64.0.0/10` carrier-grade NAT.
    Cgnat,
    /// `192.0.0.0/24` IETF protocol assignments.
    IetfProtocol,
    /// `198.18.0.0/15` benchmarking, `2001:2::/48`.
    Benchmark,
    /// `192.0.2/24`, `198.51.100/24`, `203.0.113/24`, `2001:db8::/32`.
    Documentation,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// `240.0.0.0/4`, `192.88.99.0/24`, and IPv6 outside `2000::/3`.
    Reserved,
    /// `fc00::/7` unique local.
    UniqueLocal,
    /// `fec0::/10` site-local (deprecated).
    SiteLocal,
    /// `64:ff9b:1::/48` local-use NAT64, `100::/64` discard-only.
    LocalUse,
}

impl Forbidden {
    /// A short name for the range (`loopback`, `private`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unspecified => "unspecified",
            Self::Loopback => "loopback",
            Self::Private => "private",
            Self::LinkLocal => "link-local",
            Self::CloudMetadata => "cloud-metadata",
            Self::Cgnat => "cgnat",
            Self::IetfProtocol => "ietf-protocol",
            Self::Benchmark => "benchmark",
            Self::Documentation => "documentation",
            Self::Multicast => "multicast",
            Self::Broadcast => "broadcast",
            Self::Reserved => "reserved",
            Self::UniqueLocal => "unique-local",
            Self::SiteLocal => "site-local",
            Self::LocalUse => "local-use",
        }
    }
}

/// The IPv4 address an IPv6 address embeds, if it is one of the embedding
/// forms: mapped `::ffff:0:0/96`, translated `::ffff:0:0:0/96`, compatible
/// `::/96`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`, Teredo `2001::/32`
/// (the client address, stored inverted).
pub fn embedded_ipv4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        // mapped ::ffff:a.b.c.d
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(low),
        // translated ::ffff:0:a.b.c.d
        [0, 0, 0, 0, 0xffff, 0, _, _] => Some(low),
        // compatible ::a.b.c.d (:: and ::1 are judged as IPv6 first)
        [0, 0, 0, 0, 0, 0, _, _] => Some(low),
        // NAT64 well-known prefix
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low),
        // 6to4: 2002:AABB:CCDD::/48
        [0x2002, a, b, ..] => Some(Ipv4Addr::new(
            (a >> 8) as u8,
            a as u8,
            (b >> 8) as u8,
            b as u8,
        )),
        // Teredo: 2001:0000:server:flags:port:client (client inverted)
        [0x2001, 0, ..] => {
            let c = !u32::from(low);
            Some(Ipv4Addr::from(c))
        }
        _ => None,
    }
}

/// Judges an IPv4 address.
pub fn classify_v4(ip: Ipv4Addr) -> Result<(), Forbidden> {
    let o = ip.octets();
    let f = match o {
        [0, ..] => Forbidden::Unspecified,
        [10, ..] => Forbidden::Private,
        [100, b, ..] if (64..128).contains(&b) => Forbidden::Cgnat,
        [127, ..] => Forbidden::Loopback,
        [169, 254, 169, 254] => Forbidden::CloudMetadata,
        [169, 254, ..] => Forbidden::LinkLocal,
        [172, b, ..] if (16..32).contains(&b) => Forbidden::Private,
        [192, 0, 0, _] => Forbidden::IetfProtocol,
        [192, 0, 2, _] | [198, 51, 100, _] | [203, 0, 113, _] => Forbidden::Documentation,
        [192, 88, 99, _] => Forbidden::Reserved,
        [192, 168, ..] => Forbidden::Private,
        [198, 18 | 19, ..] => Forbidden::Benchmark,
        [255, 255, 255, 255] => Forbidden::Broadcast,
        [a, ..] if (224..240).contains(&a) => Forbidden::Multicast,
        [a, ..] if a >= 240 => Forbidden::Reserved,
        _ => return Ok(()),
    };
    Err(f)
}

/// Judges an IPv6 address; embedding forms are judged by the embedded IPv4.
pub fn classify_v6(ip: Ipv6Addr) -> Result<(), Forbidden> {
    if ip.is_unspecified() {
        return Err(Forbidden::Unspecified);
    }
    if ip.is_loopback() {
        return Err(Forbidden::Loopback);
    }
    if let Some(v4) = embedded_ipv4(ip) {
        // Teredo also carries the server address; both must be acceptable.
        let s = ip.segments();
        if s[0] == 0x2001 && s[1] == 0 {
            let server =
                Ipv4Addr::new((s[2] >> 8) as u8, s[2] as u8, (s[3] >> 8) as u8, s[3] as u8);
            classify_v4(server)?;
        }
        return classify_v4(v4);
    }
    let s = ip.segments();
    let f = match s {
        [0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x254] => Forbidden::CloudMetadata,
        [a, ..] if a & 0xff00 == 0xff00 => Forbidden::Multicast,
        [a, ..] if a & 0xfe00 == 0xfc00 => Forbidden::UniqueLocal,
        [a, ..] if a & 0xffc0 == 0xfe80 => Forbidden::LinkLocal,
        [a, ..] if a & 0xffc0 == 0xfec0 => Forbidden::SiteLocal,
        [0x64, 0xff9b, 1, ..] => Forbidden::LocalUse,
        [0x100, 0, 0, 0, ..] => Forbidden::LocalUse,
        [0x2001, 0xdb8, ..] => Forbidden::Documentation,
        [0x2001, 2, 0, ..] => Forbidden::Benchmark,
        // ORCHID and other IETF protocol assignments inside 2001::/23.
        [0x2001, b, ..] if b < 0x200 => Forbidden::IetfProtocol,
        // Only 2000::/3 is global unicast.
        [a, ..] if a & 0xe000 != 0x2000 => Forbidden::Reserved,
        _ => return Ok(()),
    };
    Err(f)
}

/// Judges an address: `Ok` if a pack may connect to it.
pub fn classify(ip: IpAddr) -> Result<(), Forbidden> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// Like [`classify`], but loopback addresses (IPv4 `127/8`, `::1`, and
/// embedding forms of `127/8`) are acceptable when `allow_loopback` (the
/// test-only operator switch) is on.
pub fn permitted(ip: IpAddr, allow_loopback: bool) -> Result<(), Forbidden> {
    match classify(ip) {
        Err(Forbidden::Loopback) if allow_loopback => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_table() {
        use Forbidden as F;
        let cases: &[(&str, Option<Forbidden>)] = &[
            ("0.0.0.0", Some(F::Unspecified)),
            ("0.1.2.3", Some(F::Unspecified)),
            ("10.0.0.1", Some(F::Private)),
            ("10.255.255.255", Some(F::Private)),
            ("100.63.255.255", None),
            ("100.64.0.1", Some(F::Cgnat)),
            ("100.100.100.200", Some(F::Cgnat)),
            ("100.127.255.255", Some(F::Cgnat)),
            ("100.128.0.0", None),
            ("127.0.0.1", Some(F::Loopback)),
            ("127.255.255.254", Some(F::Loopback)),
            ("169.254.169.254", Some(F::CloudMetadata)),
            ("169.254.0.1", Some(F::LinkLocal)),
            ("172.15.255.255", None),
            ("172.16.0.1", Some(F::Private)),
            ("172.31.255.255", Some(F::Private)),
            ("172.32.0.0", None),
            ("192.0.0.1", Some(F::IetfProtocol)),
            ("192.0.2.1", Some(F::Documentation)),
            ("192.88.99.1", Some(F::Reserved)),
            ("192.168.1.1", Some(F::Private)),
            ("198.17.255.255", None),
            ("198.18.0.1", Some(F::Benchmark)),
            ("198.19.255.255", Some(F::Benchmark)),
            ("198.20.0.0", None),
            ("198.51.100.7", Some(F::Documentation)),
            ("203.0.113.9", Some(F::Documentation)),
            ("224.0.0.1", Some(F::Multicast)),
            ("239.255.255.250", Some(F::Multicast)),
            ("240.0.0.1", Some(F::Reserved)),
            ("255.255.255.255", Some(F::Broadcast)),
            ("8.8.8.8", None),
            ("93.184.216.34", None),
            ("1.1.1.1", None),
            ("::", Some(F::Unspecified)),
            ("::1", Some(F::Loopback)),
            ("::ffff:127.0.0.1", Some(F::Loopback)),
            ("::ffff:7f00:1", Some(F::Loopback)),
            ("::ffff:10.0.0.1", Some(F::Private)),
            ("::ffff:169.254.169.254", Some(F::CloudMetadata)),
            ("::ffff:8.8.8.8", None),
            ("::ffff:0:10.0.0.1", Some(F::Private)),
            ("::127.0.0.1", Some(F::Loopback)),
            ("::10.0.0.1", Some(F::Private)),
            ("::8.8.8.8", None),
            ("64:ff9b::127.0.0.1", Some(F::Loopback)),
            ("64:ff9b::a9fe:a9fe", Some(F::CloudMetadata)),
            ("64:ff9b::8.8.8.8", None),
            ("64:ff9b:1::1", Some(F::LocalUse)),
            ("2002:7f00:1::", Some(F::Loopback)),
            ("2002:a00:1::1", Some(F::Private)),
            ("2002:808:808::1", None),
            ("2001:0:4136:e378:8000:63bf:80ff:fffe", Some(F::Loopback)),
            ("2001:0:4136:e378:8000:63bf:f5ff:fffe", Some(F::Private)),
            ("2001:0:a00:1:8000:63bf:f7f7:f7f7", Some(F::Private)),
            ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", None),
            ("fe80::1", Some(F::LinkLocal)),
            ("febf::1", Some(F::LinkLocal)),
            ("fec0::1", Some(F::SiteLocal)),
            ("fc00::1", Some(F::UniqueLocal)),
            ("fd12:3456::1", Some(F::UniqueLocal)),
            ("fd00:ec2::254", Some(F::CloudMetadata)),
            ("ff02::1", Some(F::Multicast)),
            ("ff05::2", Some(F::Multicast)),
            ("2001:db8::1", Some(F::Documentation)),
            ("2001:2::1", Some(F::Benchmark)),
            ("2001:10::1", Some(F::IetfProtocol)),
            ("100::1", Some(F::LocalUse)),
            ("4000::1", Some(F::Reserved)),
            ("1::1", Some(F::Reserved)),
            ("2606:4700:4700::1111", None),
            ("2a00:1450:4001::1", None),
        ];
        for (s, want) in cases {
            let ip: IpAddr = s.parse().unwrap();
            assert_eq!(classify(ip).err(), *want, "{s}");
        }
    }

    #[test]
    fn loopback_switch_only_lifts_loopback() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(permitted(lo, false).is_err());
        assert!(permitted(lo, true).is_ok());
        assert!(permitted("::1".parse().unwrap(), true).is_ok());
        assert!(permitted("::ffff:127.0.0.1".parse().unwrap(), true).is_ok());
        for s in ["0.0.0.0", "10.0.0.1", "169.254.169.254", "::", "fd00::1"] {
            assert!(permitted(s.parse().unwrap(), true).is_err(), "{s}");
        }
    }
}
