//! The ICMP echo socket of one address family, shared by every run of the process, with
//! round trips timed the way iputils `ping` times them.
//!
//! Opening: a datagram ICMP socket (`SOCK_DGRAM` + `IPPROTO_ICMP` / `IPPROTO_ICMPV6`,
//! allowed by `net.ipv4.ping_group_range`) first, a raw one (`CAP_NET_RAW`) if the kernel
//! refuses it. When neither opens, the datagram socket's error is returned.
//!
//! Timing: the socket has `SO_TIMESTAMPNS`, so the kernel stamps every datagram with its
//! receive time (`CLOCK_REALTIME`, taken when the packet came in from the network
//! device, before any task is woken). [`EchoSocket::ping`] reads the realtime clock
//! right before `sendto`, the receive task reads each reply with `recvmsg` and its
//! timestamp control message, and the round trip is the difference: neither the wake-up
//! of the receive task nor that of the waiting run is counted. A reply without a kernel
//! timestamp, or whose stamp is not within the span measured on the monotonic clock
//! (the realtime clock was stepped), is timed in user space instead: monotonic clock
//! before `sendto` to monotonic clock right after `recvmsg` returned.
//!
//! Packets: echo requests are encoded here ([`echo_request`]; surge-ping keeps its
//! encoder private). One task per socket reads every datagram, decodes it with
//! surge-ping's public decoders (echo replies, and ICMP errors with the request they
//! quote) and hands it to the request waiting for (destination, identifier,
//! sequence). Datagram sockets rewrite the identifier, so there it is not part of the
//! key (see the executor's documentation for how sequences stay unique). A waiter
//! unregisters itself when dropped, so a run cancelled at any point leaves nothing
//! behind.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use nix::sys::socket::{
    ControlMessageOwned, MsgFlags, SockaddrStorage, recvmsg, setsockopt, sockopt,
};
use socket2::{Domain, Protocol, SockAddr, SockRef, Socket, Type};
use surge_ping::{IcmpPacket, Icmpv4Packet, Icmpv6Packet};
use tokio::io::Interest;
use tokio::net::UdpSocket;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::model::IpFamily;

/// Largest datagram read whole: an ICMPv6 error quotes at most 1232 bytes, an ICMPv4 one
/// at most 548 (plus the IPv4 header on raw sockets). Longer ones are truncated, which
/// loses nothing the decoders read.
const RECV_BUFFER: usize = 2048;
/// Pause after a failed `recvmsg` that was not "nothing to read", so that an error that
/// repeats cannot spin the receive task.
const RECV_ERROR_PAUSE: Duration = Duration::from_millis(1);

/// What became of one echo request.
#[derive(Debug)]
pub(crate) enum Pong {
    /// An echo reply, `rtt` after the request was sent; `kernel_timestamp` says whether
    /// the kernel's receive timestamp timed it (else the user-space fallback did).
    Reply {
        rtt: Duration,
        kernel_timestamp: bool,
    },
    /// An ICMP error (destination unreachable, time exceeded, ...) answered the request.
    IcmpError(IcmpPacket),
    /// Nothing came back in time.
    Timeout,
    /// The operating system refused to send the request.
    NotSent(io::Error),
    /// The request was not sent for a reason of ours (the same request already waiting
    /// for its reply, or a payload that cannot be encoded).
    Skipped(String),
}

/// One ICMP socket and the task reading it; cheap to clone, closed with the last clone.
#[derive(Clone)]
pub(crate) struct EchoSocket {
    inner: Arc<Owner>,
}

/// Owns the receive task: aborts it, and releases every waiter, when the last
/// [`EchoSocket`] goes.
struct Owner {
    shared: Arc<Shared>,
    receiver: JoinHandle<()>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.receiver.abort();
        self.shared.lock_waiters().clear();
    }
}

/// What the receive task and the senders share.
struct Shared {
    /// The ICMP socket, registered with tokio's reactor through its datagram socket type
    /// (only readiness and the descriptor are used: `sendto` and `recvmsg` are ours).
    socket: UdpSocket,
    family: IpFamily,
    socket_type: Type,
    /// Whether `SO_TIMESTAMPNS` could be set (only for the log line).
    timestamps: bool,
    waiters: Mutex<HashMap<Token, Registration>>,
    next_id: AtomicU64,
}

/// What a reply is matched on: the address the request went to, its identifier (raw
/// sockets only: datagram sockets rewrite it) and its sequence number.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Token {
    dest: IpAddr,
    ident: Option<u16>,
    seq: u16,
}

struct Registration {
    id: u64,
    tx: oneshot::Sender<Received>,
}

/// A decoded datagram and when it arrived.
struct Received {
    packet: IcmpPacket,
    /// The kernel's receive timestamp, if the datagram had one.
    kernel: Option<SystemTime>,
    /// The monotonic clock right after `recvmsg` returned it.
    user: Instant,
}

impl EchoSocket {
    /// Opens the socket of `family` (datagram, else raw) and starts its receive task on
    /// the current tokio runtime.
    pub(crate) fn open(family: IpFamily) -> io::Result<EchoSocket> {
        let (socket, socket_type) = open_socket(family)?;
        socket.set_nonblocking(true)?;
        let timestamps = match setsockopt(&socket, sockopt::ReceiveTimestampns, &true) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(error = %e, "no SO_TIMESTAMPNS: round trips timed in user space");
                false
            }
        };
        let shared = Arc::new(Shared {
            socket: UdpSocket::from_std(std::net::UdpSocket::from(socket))?,
            family,
            socket_type,
            timestamps,
            waiters: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
        });
        let receiver = tokio::spawn(receive(shared.clone()));
        Ok(EchoSocket {
            inner: Arc::new(Owner { shared, receiver }),
        })
    }

    /// `SOCK_DGRAM` or `SOCK_RAW`.
    pub(crate) fn socket_type(&self) -> Type {
        self.inner.shared.socket_type
    }

    /// Whether replies carry kernel receive timestamps.
    pub(crate) fn kernel_timestamps(&self) -> bool {
        self.inner.shared.timestamps
    }

    /// Sends one echo request with `payload` to `dest` and waits at most `wait` for what
    /// answers it. `ident` is used on raw sockets only (datagram sockets put their own).
    pub(crate) async fn ping(
        &self,
        dest: IpAddr,
        ident: u16,
        seq: u16,
        payload: &[u8],
        wait: Duration,
    ) -> Pong {
        let shared = &self.inner.shared;
        let raw = shared.socket_type == Type::RAW;
        let packet = echo_request(dest, ident, seq, payload);
        let token = Token {
            dest,
            ident: raw.then_some(ident),
            seq,
        };
        // Registered before sending: on loopback the reply arrives during `sendto`.
        let Some(mut waiter) = shared.register(token) else {
            return Pong::Skipped(format!(
                "an echo request to {dest} with sequence {seq} is already waiting"
            ));
        };
        let target = SockAddr::from(SocketAddr::new(dest, 0));
        let mut sent = None;
        let outcome = shared
            .socket
            .async_io(Interest::WRITABLE, || {
                let mono = Instant::now();
                let wall = SystemTime::now();
                let result = SockRef::from(&shared.socket).send_to(&packet, &target);
                sent = Some((mono, wall));
                result
            })
            .await;
        if let Err(e) = outcome {
            return Pong::NotSent(e);
        }
        let Some((sent_mono, sent_wall)) = sent else {
            return Pong::Skipped("the echo request was not sent".to_owned());
        };
        let received = match tokio::time::timeout(wait, &mut waiter.rx).await {
            Ok(Ok(received)) => received,
            // The sender went without a reply: the socket is closing.
            Ok(Err(_)) | Err(_) => return Pong::Timeout,
        };
        if !is_echo_reply(&received.packet) {
            return Pong::IcmpError(received.packet);
        }
        let (rtt, kernel_timestamp) =
            round_trip(sent_mono, sent_wall, received.kernel, received.user);
        Pong::Reply {
            rtt,
            kernel_timestamp,
        }
    }
}

/// The round trip of a request sent at `sent_mono` / `sent_wall` (read together right
/// before `sendto`) whose reply the kernel stamped `kernel` and `recvmsg` returned at
/// `user`: the kernel's stamp when there is one within the span the monotonic clock saw,
/// else that span. Returns it and whether the kernel's stamp was used.
pub(crate) fn round_trip(
    sent_mono: Instant,
    sent_wall: SystemTime,
    kernel: Option<SystemTime>,
    user: Instant,
) -> (Duration, bool) {
    let user_rtt = user.saturating_duration_since(sent_mono);
    match kernel.and_then(|k| k.duration_since(sent_wall).ok()) {
        Some(rtt) if rtt <= user_rtt => (rtt, true),
        _ => (user_rtt, false),
    }
}

/// An ICMP (v4) or ICMPv6 echo request to `dest`: type, code 0, checksum, identifier,
/// sequence, payload. The ICMPv4 checksum is filled in (raw sockets send it as it is;
/// datagram sockets recompute it, and put their own identifier); the kernel always
/// computes the ICMPv6 one.
pub(crate) fn echo_request(dest: IpAddr, ident: u16, seq: u16, payload: &[u8]) -> Vec<u8> {
    let kind = if dest.is_ipv4() { 8 } else { 128 };
    let mut packet = Vec::with_capacity(8 + payload.len());
    packet.extend_from_slice(&[kind, 0, 0, 0]);
    packet.extend_from_slice(&ident.to_be_bytes());
    packet.extend_from_slice(&seq.to_be_bytes());
    packet.extend_from_slice(payload);
    if dest.is_ipv4() {
        let sum = internet_checksum(&packet).to_be_bytes();
        packet[2..4].copy_from_slice(&sum);
    }
    packet
}

/// The RFC 1071 checksum: ones' complement of the ones' complement sum of 16-bit words.
fn internet_checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut words = data.chunks_exact(2);
    for word in &mut words {
        sum += u32::from(u16::from_be_bytes([word[0], word[1]]));
    }
    if let [last] = words.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn is_echo_reply(packet: &IcmpPacket) -> bool {
    match packet {
        IcmpPacket::V4(p) => p.get_icmp_type().0 == 0,
        IcmpPacket::V6(p) => p.get_icmpv6_type().0 == 129,
    }
}

/// A datagram ICMP socket of `family`, else a raw one; the datagram error if neither.
fn open_socket(family: IpFamily) -> io::Result<(Socket, Type)> {
    let (domain, protocol) = match family {
        IpFamily::IPv4 => (Domain::IPV4, Protocol::ICMPV4),
        IpFamily::IPv6 => (Domain::IPV6, Protocol::ICMPV6),
    };
    let first = match Socket::new(domain, Type::DGRAM, Some(protocol)) {
        Ok(socket) => return Ok((socket, Type::DGRAM)),
        Err(e) => e,
    };
    tracing::debug!(error = %first, "no datagram ICMP socket, trying a raw one");
    match Socket::new(domain, Type::RAW, Some(protocol)) {
        Ok(socket) => Ok((socket, Type::RAW)),
        Err(_) => Err(first),
    }
}

impl Shared {
    fn lock_waiters(&self) -> std::sync::MutexGuard<'_, HashMap<Token, Registration>> {
        self.waiters.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a waiter for `token`; `None` if one already waits for it.
    fn register(self: &Arc<Self>, token: Token) -> Option<Waiter> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        match self.lock_waiters().entry(token) {
            Entry::Occupied(_) => return None,
            Entry::Vacant(slot) => {
                slot.insert(Registration { id, tx });
            }
        }
        Some(Waiter {
            shared: self.clone(),
            token,
            id,
            rx,
        })
    }

    /// Hands a received datagram to the request waiting for it, if any.
    fn dispatch(&self, datagram: &[u8], from: IpAddr, kernel: Option<SystemTime>, user: Instant) {
        let decoded = match (self.family, from) {
            (IpFamily::IPv4, IpAddr::V4(src)) => {
                Icmpv4Packet::decode(datagram, self.socket_type, src, Ipv4Addr::UNSPECIFIED)
                    .map(IcmpPacket::V4)
            }
            (IpFamily::IPv6, IpAddr::V6(src)) => {
                Icmpv6Packet::decode(datagram, src).map(IcmpPacket::V6)
            }
            _ => return,
        };
        let packet = match decoded {
            Ok(packet) => packet,
            // Our own requests (raw sockets see them on loopback), neighbour discovery
            // and anything malformed.
            Err(e) => {
                tracing::trace!(%from, error = %e, "ignored an ICMP datagram");
                return;
            }
        };
        let token = Token {
            // An ICMP error comes from a router: the request's destination is quoted in it.
            dest: packet.real_destination(),
            ident: (self.socket_type == Type::RAW).then(|| packet.get_identifier().0),
            seq: packet.get_sequence().0,
        };
        let waiting = self.lock_waiters().remove(&token);
        match waiting {
            Some(registration) => {
                // A closed receiver is a run that stopped waiting: nothing to do.
                let _ = registration.tx.send(Received {
                    packet,
                    kernel,
                    user,
                });
            }
            None => tracing::debug!(%from, ?token, "no request is waiting for this ICMP packet"),
        }
    }
}

/// One request's registration; unregisters on drop unless the reply took it.
struct Waiter {
    shared: Arc<Shared>,
    token: Token,
    id: u64,
    rx: oneshot::Receiver<Received>,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let mut waiters = self.shared.lock_waiters();
        if let Entry::Occupied(entry) = waiters.entry(self.token)
            && entry.get().id == self.id
        {
            entry.remove();
        }
    }
}

/// The receive task: reads every datagram of the socket and dispatches it.
async fn receive(shared: Arc<Shared>) {
    let mut buf = vec![0u8; RECV_BUFFER];
    let mut control = nix::cmsg_space!(nix::sys::time::TimeSpec);
    loop {
        if let Err(e) = shared.socket.readable().await {
            tracing::warn!(error = %e, "the ICMP socket cannot be read any more");
            return;
        }
        let read = shared.socket.try_io(Interest::READABLE, || {
            read_datagram(&shared.socket, &mut buf, &mut control)
        });
        match read {
            Ok(Some(d)) => {
                let data = buf.get(..d.len).unwrap_or_default();
                shared.dispatch(data, d.from, d.kernel, d.user);
            }
            Ok(None) => {}
            // Nothing more to read: readiness was cleared, wait for the next datagram.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => {
                tracing::debug!(error = %e, "reading the ICMP socket failed");
                tokio::time::sleep(RECV_ERROR_PAUSE).await;
            }
        }
    }
}

/// Where a datagram came from and when; its bytes are the first `len` of the buffer.
struct Datagram {
    len: usize,
    from: IpAddr,
    kernel: Option<SystemTime>,
    user: Instant,
}

/// One `recvmsg`: `None` for a datagram without a usable source address.
fn read_datagram(
    socket: &impl AsFd,
    buf: &mut [u8],
    control: &mut Vec<u8>,
) -> io::Result<Option<Datagram>> {
    let mut iov = [IoSliceMut::new(buf)];
    let msg = recvmsg::<SockaddrStorage>(
        socket.as_fd().as_raw_fd(),
        &mut iov,
        Some(control),
        MsgFlags::MSG_DONTWAIT,
    )?;
    let user = Instant::now();
    let len = msg.bytes;
    let mut kernel = None;
    // A truncated control buffer only loses the timestamp.
    if let Ok(cmsgs) = msg.cmsgs() {
        for cmsg in cmsgs {
            if let ControlMessageOwned::ScmTimestampns(ts) = cmsg {
                kernel = timespec_to_system_time(ts.tv_sec(), ts.tv_nsec());
            }
        }
    }
    let from = msg.address.as_ref().and_then(source_ip);
    Ok(from.map(|from| Datagram {
        len,
        from,
        kernel,
        user,
    }))
}

fn source_ip(addr: &SockaddrStorage) -> Option<IpAddr> {
    if let Some(v4) = addr.as_sockaddr_in() {
        return Some(IpAddr::V4(v4.ip()));
    }
    addr.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
}

/// A `CLOCK_REALTIME` timespec as a [`SystemTime`]; `None` for one before 1970 or out
/// of range.
fn timespec_to_system_time(
    secs: impl TryInto<u64>,
    nanos: impl TryInto<u32>,
) -> Option<SystemTime> {
    let secs = secs.try_into().ok()?;
    let nanos = nanos.try_into().ok().filter(|n| *n < 1_000_000_000)?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_stamp_times_the_round_trip_when_it_is_plausible() {
        let mono = Instant::now();
        let wall = SystemTime::now();
        let user = mono + Duration::from_micros(300);
        let kernel = wall + Duration::from_micros(40);
        assert_eq!(
            round_trip(mono, wall, Some(kernel), user),
            (Duration::from_micros(40), true)
        );
        // No stamp: the user-space span.
        assert_eq!(
            round_trip(mono, wall, None, user),
            (Duration::from_micros(300), false)
        );
        // The realtime clock went back between send and receive.
        let before = wall - Duration::from_secs(2);
        assert_eq!(
            round_trip(mono, wall, Some(before), user),
            (Duration::from_micros(300), false)
        );
        // ... or forward: a stamp later than the reply was read cannot be right.
        let after = wall + Duration::from_secs(2);
        assert_eq!(
            round_trip(mono, wall, Some(after), user),
            (Duration::from_micros(300), false)
        );
    }

    #[test]
    fn echo_requests_carry_a_valid_checksum() {
        let v4 = echo_request("127.0.0.1".parse().unwrap(), 0x1234, 0xabcd, b"hello");
        assert_eq!(&v4[..2], &[8, 0]);
        assert_eq!(&v4[4..8], &[0x12, 0x34, 0xab, 0xcd]);
        assert_eq!(&v4[8..], b"hello");
        // A packet with its checksum in place sums to zero.
        assert_eq!(internet_checksum(&v4), 0);
        assert_ne!(&v4[2..4], &[0, 0]);
        // RFC 1071's worked example: 0001 f203 f4f5 f6f7 sums to ddf2.
        assert_eq!(
            internet_checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            !0xddf2
        );
        let v6 = echo_request("::1".parse().unwrap(), 1, 2, b"x");
        assert_eq!(v6, [128, 0, 0, 0, 0, 1, 0, 2, b'x']);
    }

    #[test]
    fn echo_requests_decode_as_surge_ping_reads_them() {
        // surge-ping refuses an echo request as a reply, by its type: ours must have it.
        let src = "127.0.0.1".parse().unwrap();
        let packet = echo_request(IpAddr::V4(src), 7, 9, b"payload!");
        assert!(Icmpv4Packet::decode(&packet, Type::DGRAM, src, Ipv4Addr::UNSPECIFIED).is_err());
        let mut reply = packet.clone();
        reply[0] = 0;
        let decoded =
            Icmpv4Packet::decode(&reply, Type::DGRAM, src, Ipv4Addr::UNSPECIFIED).unwrap();
        assert_eq!(decoded.get_sequence().0, 9);
        assert_eq!(decoded.get_identifier().0, 7);
        assert!(is_echo_reply(&IcmpPacket::V4(decoded)));
    }

    /// Against loopback, with whatever ICMP socket this process may open (raw as root):
    /// replies come back timed by the kernel's receive timestamp, within the time the
    /// whole ping took.
    #[tokio::test]
    async fn loopback_replies_carry_kernel_timestamps() {
        for (family, dest) in [(IpFamily::IPv4, "127.0.0.1"), (IpFamily::IPv6, "::1")] {
            let socket = match EchoSocket::open(family) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("SKIP {dest}: no ICMP socket ({e})");
                    continue;
                }
            };
            assert!(socket.kernel_timestamps());
            let dest: IpAddr = dest.parse().unwrap();
            for seq in 0..3u16 {
                let started = Instant::now();
                let pong = socket
                    .ping(dest, 0x5eed, seq, b"timestamp test", Duration::from_secs(5))
                    .await;
                let whole = started.elapsed();
                match pong {
                    Pong::Reply {
                        rtt,
                        kernel_timestamp,
                    } => {
                        assert!(kernel_timestamp, "{dest} seq {seq}: no kernel timestamp");
                        assert!(rtt > Duration::ZERO && rtt <= whole, "{rtt:?} {whole:?}");
                    }
                    other => panic!("{dest} seq {seq}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn timespecs_convert_within_range_only() {
        assert_eq!(
            timespec_to_system_time(1i64, 500i64),
            Some(SystemTime::UNIX_EPOCH + Duration::new(1, 500))
        );
        assert_eq!(timespec_to_system_time(-1i64, 0i64), None);
        assert_eq!(timespec_to_system_time(1i64, 1_000_000_000i64), None);
        assert_eq!(timespec_to_system_time(1i64, -1i64), None);
    }
}
