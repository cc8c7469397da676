//! TCP connection to an ordered list of addresses (see [`super::resolve::AddressList`]):
//! each address is tried in turn until one accepts. A check that pins no address family
//! gets IPv6 and IPv4 addresses alternating, IPv6 first, so where IPv6 is disabled or
//! unreachable (the connect fails at once with EAFNOSUPPORT, EADDRNOTAVAIL, ENETUNREACH or
//! EHOSTUNREACH) the run goes on over IPv4. There is no per-address deadline (no
//! happy-eyeballs race): the run's time limit bounds the whole attempt.
//!
//! When every address fails, the error reported is the first one that is not merely
//! "this family cannot be used here", so a refused IPv4 connection is not hidden behind
//! a disabled IPv6.
//!
//! A check's connection is closed with a reset (`SO_LINGER` 0), as load balancers'
//! health checks do: by then the check has read what it needs, the agent keeps no
//! TIME_WAIT socket per check (thousands a minute would crowd its ephemeral ports), and
//! the FIN exchange, a tenth of an uptime check's CPU, is skipped.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::net::TcpStream;

use super::http_error::FetchError;
use super::resolve::AddressList;

/// Connects to the first address of `addrs` that accepts, on `port`. `target` is the
/// `host:port` named in error messages.
pub(crate) async fn connect_any(
    addrs: &AddressList,
    port: u16,
    target: &str,
) -> Result<TcpStream, FetchError> {
    let mut first: Option<(IpAddr, io::Error)> = None;
    let mut first_usable: Option<(IpAddr, io::Error)> = None;
    for ip in addrs.iter() {
        match TcpStream::connect(SocketAddr::new(ip, port)).await {
            Ok(stream) => {
                // The TLS Finished and a request may follow a write that is not yet
                // acknowledged; Nagle would hold them back by a delayed-ACK period.
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(error = %e, "cannot disable Nagle's algorithm");
                }
                if let Err(e) = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO)) {
                    tracing::debug!(error = %e, "cannot set SO_LINGER; the close will be graceful");
                }
                if first.is_some() {
                    tracing::debug!(%ip, port, "connected after an earlier address failed");
                }
                return Ok(stream);
            }
            Err(e) => {
                tracing::debug!(%ip, port, error = %e, "connect failed; trying the next address");
                if first_usable.is_none() && !family_unusable(&e) {
                    first_usable = Some((ip, io::Error::new(e.kind(), e.to_string())));
                }
                first.get_or_insert((ip, e));
            }
        }
    }
    match first_usable.or(first) {
        Some((ip, error)) => Err(connect_error(target, ip, &error)),
        None => Err(FetchError::connect(
            target,
            &io::Error::from(io::ErrorKind::AddrNotAvailable),
        )),
    }
}

/// Whether a connect error says the address family cannot be used from this host
/// (disabled, not configured, no route of that family) rather than something about
/// the peer.
pub(crate) fn family_unusable(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc_errno::EAFNOSUPPORT | libc_errno::EADDRNOTAVAIL | libc_errno::ENETUNREACH)
    )
}

/// The error of a connect to `ip`; a family that cannot be used is named as such.
fn connect_error(target: &str, ip: IpAddr, error: &io::Error) -> FetchError {
    if family_unusable(error) {
        let family = if ip.is_ipv6() { "IPv6" } else { "IPv4" };
        return FetchError::new(
            crate::model::ErrorKind::Connect,
            format!(
                "cannot connect to {target} over {family} ({ip}): {family} is disabled or not configured on this host ({error})"
            ),
        );
    }
    FetchError::connect(target, error)
}

/// Linux errno values (the same on every Linux architecture Rust supports).
mod libc_errno {
    pub(super) const EAFNOSUPPORT: i32 = 97;
    pub(super) const EADDRNOTAVAIL: i32 = 99;
    pub(super) const ENETUNREACH: i32 = 101;
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    #[test]
    fn unusable_families_are_told_apart_from_peer_errors() {
        assert!(family_unusable(&io::Error::from_raw_os_error(99)));
        assert!(family_unusable(&io::Error::from_raw_os_error(97)));
        assert!(family_unusable(&io::Error::from_raw_os_error(101)));
        assert!(!family_unusable(&io::Error::from_raw_os_error(111)));
        let e = connect_error(
            "localhost:80",
            "::1".parse().unwrap(),
            &io::Error::from_raw_os_error(99),
        );
        assert!(
            e.message
                .starts_with("cannot connect to localhost:80 over IPv6 (::1): IPv6 is disabled"),
            "{}",
            e.message
        );
    }

    #[tokio::test]
    async fn the_next_address_is_tried_when_one_fails() {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        // Nothing listens on [::1]:port (refused, or unusable where IPv6 is off).
        let list = AddressList::interleaved(
            std::iter::once(IpAddr::from(std::net::Ipv6Addr::LOCALHOST)),
            std::iter::once(IpAddr::from(Ipv4Addr::LOCALHOST)),
        );
        let stream = connect_any(&list, port, "x").await.unwrap();
        assert_eq!(
            stream.peer_addr().unwrap(),
            SocketAddr::from((Ipv4Addr::LOCALHOST, port))
        );
        drop(listener);
        let refused = connect_any(
            &AddressList::one(IpAddr::from(Ipv4Addr::LOCALHOST)),
            port,
            "x",
        )
        .await
        .unwrap_err();
        assert!(refused.message.contains("refused"), "{}", refused.message);
    }
}
