//! Which captured IP packets belong to a diagnosed attempt. The capture socket sees
//! every packet of the host; only those of the attempt are kept:
//!
//! - TCP and UDP packets between this host and a target address on the target port
//!   (either direction);
//! - ICMP and ICMPv6 packets from or to a target address (echo, errors it sends);
//! - ICMP and ICMPv6 errors from anywhere (a router) about a packet that was sent to a
//!   target address (the quoted header names it): "host unreachable", "time exceeded".
//!
//! Packets start at the IP header (cooked capture, no link-layer header). Anything that
//! cannot be parsed is not kept.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP: u8 = 1;
const ICMPV6: u8 = 58;

/// The addresses and port of a diagnosed attempt.
#[derive(Debug, Clone)]
pub(crate) struct PacketFilter {
    targets: Vec<IpAddr>,
    port: u16,
}

impl PacketFilter {
    pub(crate) fn new(targets: Vec<IpAddr>, port: u16) -> PacketFilter {
        PacketFilter { targets, port }
    }

    /// Whether `packet` (starting at its IP header) belongs to the attempt.
    pub(crate) fn matches(&self, packet: &[u8]) -> bool {
        let Some(ip) = IpPacket::parse(packet) else {
            return false;
        };
        match ip.protocol {
            TCP | UDP => {
                let Some((sport, dport)) = ports(ip.payload) else {
                    return false;
                };
                (self.is_target(ip.dst) && dport == self.port)
                    || (self.is_target(ip.src) && sport == self.port)
            }
            ICMP | ICMPV6 => {
                if self.is_target(ip.src) || self.is_target(ip.dst) {
                    return true;
                }
                quoted_destination(ip.protocol, ip.payload).is_some_and(|d| self.is_target(d))
            }
            _ => false,
        }
    }

    fn is_target(&self, ip: IpAddr) -> bool {
        self.targets.contains(&ip)
    }
}

/// The parts of an IPv4 or IPv6 packet the filter looks at.
struct IpPacket<'a> {
    src: IpAddr,
    dst: IpAddr,
    /// The transport protocol (IPv6: the first next-header; extension headers are not
    /// followed, so such packets are not kept).
    protocol: u8,
    payload: &'a [u8],
}

impl<'a> IpPacket<'a> {
    fn parse(packet: &'a [u8]) -> Option<IpPacket<'a>> {
        match packet.first()? >> 4 {
            4 => {
                let header_len = usize::from(packet[0] & 0x0f) * 4;
                if header_len < 20 || packet.len() < header_len {
                    return None;
                }
                Some(IpPacket {
                    src: IpAddr::V4(v4(&packet[12..16])?),
                    dst: IpAddr::V4(v4(&packet[16..20])?),
                    protocol: packet[9],
                    payload: &packet[header_len..],
                })
            }
            6 => {
                if packet.len() < 40 {
                    return None;
                }
                Some(IpPacket {
                    src: IpAddr::V6(v6(&packet[8..24])?),
                    dst: IpAddr::V6(v6(&packet[24..40])?),
                    protocol: packet[6],
                    payload: &packet[40..],
                })
            }
            _ => None,
        }
    }
}

fn v4(bytes: &[u8]) -> Option<Ipv4Addr> {
    let octets: [u8; 4] = bytes.try_into().ok()?;
    Some(Ipv4Addr::from(octets))
}

fn v6(bytes: &[u8]) -> Option<Ipv6Addr> {
    let octets: [u8; 16] = bytes.try_into().ok()?;
    Some(Ipv6Addr::from(octets))
}

/// Source and destination port of a TCP or UDP header.
fn ports(transport: &[u8]) -> Option<(u16, u16)> {
    let sport = u16::from_be_bytes(transport.get(0..2)?.try_into().ok()?);
    let dport = u16::from_be_bytes(transport.get(2..4)?.try_into().ok()?);
    Some((sport, dport))
}

/// For an ICMP error (destination unreachable, time exceeded, ...), the destination of
/// the packet it quotes.
fn quoted_destination(protocol: u8, icmp: &[u8]) -> Option<IpAddr> {
    let kind = *icmp.first()?;
    let is_error = match protocol {
        ICMP => matches!(kind, 3 | 4 | 5 | 11 | 12),
        _ => matches!(kind, 1..=4),
    };
    if !is_error {
        return None;
    }
    // 8 bytes of ICMP header, then the quoted IP header.
    IpPacket::parse(icmp.get(8..)?).map(|quoted| quoted.dst)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal IPv4 packet from `src` to `dst` with `protocol` and `payload`.
    pub(crate) fn ipv4(src: [u8; 4], dst: [u8; 4], protocol: u8, payload: &[u8]) -> Vec<u8> {
        let total = u16::try_from(20 + payload.len()).unwrap();
        let mut p = vec![0x45, 0];
        p.extend_from_slice(&total.to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, 0, 64, protocol, 0, 0]);
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(payload);
        p
    }

    fn tcp(sport: u16, dport: u16) -> Vec<u8> {
        let mut t = Vec::new();
        t.extend_from_slice(&sport.to_be_bytes());
        t.extend_from_slice(&dport.to_be_bytes());
        t.extend_from_slice(&[0; 16]);
        t
    }

    fn filter() -> PacketFilter {
        PacketFilter::new(vec![IpAddr::from([198, 51, 100, 7])], 443)
    }

    #[test]
    fn tcp_to_and_from_the_target_port_is_kept() {
        let f = filter();
        assert!(f.matches(&ipv4(
            [192, 0, 2, 1],
            [198, 51, 100, 7],
            TCP,
            &tcp(40000, 443)
        )));
        assert!(f.matches(&ipv4(
            [198, 51, 100, 7],
            [192, 0, 2, 1],
            TCP,
            &tcp(443, 40000)
        )));
        assert!(!f.matches(&ipv4(
            [192, 0, 2, 1],
            [198, 51, 100, 7],
            TCP,
            &tcp(40000, 80)
        )));
        assert!(!f.matches(&ipv4(
            [192, 0, 2, 1],
            [198, 51, 100, 8],
            TCP,
            &tcp(40000, 443)
        )));
    }

    #[test]
    fn icmp_errors_about_the_target_are_kept() {
        let f = filter();
        let original = ipv4([192, 0, 2, 1], [198, 51, 100, 7], TCP, &tcp(40000, 443));
        let mut unreachable = vec![3, 1, 0, 0, 0, 0, 0, 0];
        unreachable.extend_from_slice(&original[..28]);
        assert!(f.matches(&ipv4([192, 0, 2, 2], [192, 0, 2, 1], ICMP, &unreachable)));
        let other = ipv4([192, 0, 2, 1], [203, 0, 113, 1], TCP, &tcp(40000, 443));
        let mut unrelated = vec![11, 0, 0, 0, 0, 0, 0, 0];
        unrelated.extend_from_slice(&other[..28]);
        assert!(!f.matches(&ipv4([192, 0, 2, 2], [192, 0, 2, 1], ICMP, &unrelated)));
        // An echo request from elsewhere is not an error: nothing is quoted.
        let echo = [8, 0, 0, 0, 0, 0, 0, 0];
        assert!(!f.matches(&ipv4([192, 0, 2, 2], [192, 0, 2, 1], ICMP, &echo)));
    }

    #[test]
    fn ipv6_packets_are_read() {
        let f = PacketFilter::new(vec![IpAddr::from(Ipv6Addr::LOCALHOST)], 8080);
        let mut p = vec![0x60, 0, 0, 0, 0, 20, TCP, 64];
        p.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
        p.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
        p.extend_from_slice(&tcp(50000, 8080));
        assert!(f.matches(&p));
    }

    #[test]
    fn garbage_is_not_kept() {
        let f = filter();
        assert!(!f.matches(&[]));
        assert!(!f.matches(&[0x45, 0, 0]));
        assert!(!f.matches(&[0x4f; 30]));
        assert!(!f.matches(&[0x60; 10]));
        assert!(!f.matches(&ipv4([192, 0, 2, 1], [198, 51, 100, 7], TCP, &[1])));
    }
}
