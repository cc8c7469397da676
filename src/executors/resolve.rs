//! Host name resolution for network checks: one hickory resolver per process, built from
//! the system configuration (`/etc/resolv.conf` and `/etc/hosts`). There is never a
//! fallback to a public resolver: if the system configuration cannot be read, the
//! resolver still answers from `/etc/hosts` (so `localhost` works) and every other name
//! fails with a DNS error that says why.
//!
//! Answers are cached for their TTL (at most [`MAX_POSITIVE_TTL`]), like a caching stub
//! resolver would; the `dns` phase of a run is the time the lookup really took.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use hickory_resolver::config::{ResolverConfig, ResolverOpts};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::{ResolveError, TokioResolver};

use super::http_error::FetchError;
use crate::model::IpFamily;

/// Longest time a positive answer is reused.
const MAX_POSITIVE_TTL: Duration = Duration::from_secs(300);
/// Longest time a negative answer (NXDOMAIN, no records) is reused.
const MAX_NEGATIVE_TTL: Duration = Duration::from_secs(30);
/// Distinct records kept in the cache.
const CACHE_SIZE: usize = 1024;
/// Addresses of one name a run may try, in the order the resolver gave them.
pub(crate) const MAX_ADDRESSES: usize = 4;

/// The process-wide resolver.
pub(crate) struct SystemResolver {
    resolver: TokioResolver,
    /// Why the system configuration could not be used, if it could not.
    config_error: Option<String>,
}

impl SystemResolver {
    /// Reads the system configuration once.
    pub(crate) fn from_system() -> SystemResolver {
        match hickory_resolver::system_conf::read_system_conf() {
            Ok((config, opts)) => SystemResolver::with_config(config, opts, None),
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "cannot read the system DNS configuration; only /etc/hosts names will resolve"
                );
                let empty = ResolverConfig::from_parts(None, Vec::new(), Vec::new());
                SystemResolver::with_config(empty, ResolverOpts::default(), Some(e.to_string()))
            }
        }
    }

    /// A resolver with the given configuration; `config_error` says why it is not the
    /// system's (it then has no name servers).
    fn with_config(
        config: ResolverConfig,
        mut opts: ResolverOpts,
        config_error: Option<String>,
    ) -> SystemResolver {
        opts.cache_size = CACHE_SIZE;
        opts.positive_max_ttl = Some(MAX_POSITIVE_TTL);
        opts.negative_max_ttl = Some(MAX_NEGATIVE_TTL);
        let resolver =
            TokioResolver::builder_with_config(config, TokioConnectionProvider::default())
                .with_options(opts)
                .build();
        SystemResolver {
            resolver,
            config_error,
        }
    }

    /// The name servers of the configuration (for diagnosing DNS failures).
    pub(crate) fn name_servers(&self) -> Vec<SocketAddr> {
        let mut out: Vec<SocketAddr> = Vec::new();
        for ns in self.resolver.config().name_servers() {
            if !out.contains(&ns.socket_addr) {
                out.push(ns.socket_addr);
            }
        }
        out
    }

    /// A resolver with the same configuration and no cache, so that a lookup really
    /// asks the name servers (diagnostics re-run a failed lookup with it).
    pub(crate) fn without_cache(&self) -> SystemResolver {
        let mut opts = self.resolver.options().clone();
        opts.cache_size = 0;
        let resolver = TokioResolver::builder_with_config(
            self.resolver.config().clone(),
            TokioConnectionProvider::default(),
        )
        .with_options(opts)
        .build();
        SystemResolver {
            resolver,
            config_error: self.config_error.clone(),
        }
    }

    /// The addresses of `host` of one family (A or AAAA records only).
    pub(crate) async fn lookup(
        &self,
        host: &str,
        family: IpFamily,
    ) -> Result<AddressList, FetchError> {
        self.lookup_family(host, family)
            .await
            .map_err(|failure| failure.error)
    }

    /// The addresses a check may connect to: those of `family` when it pins one, else
    /// both families (A and AAAA asked at once), IPv6 and IPv4 alternating with IPv6
    /// first. Without a pinned family, a name with addresses of only one family is
    /// fine; it fails only when neither lookup found an address.
    pub(crate) async fn lookup_for(
        &self,
        host: &str,
        family: Option<IpFamily>,
    ) -> Result<AddressList, FetchError> {
        match family {
            Some(family) => self.lookup(host, family).await,
            None => {
                let (v6, v4) = tokio::join!(
                    self.lookup_family(host, IpFamily::IPv6),
                    self.lookup_family(host, IpFamily::IPv4)
                );
                merge_families(host, v6, v4)
            }
        }
    }

    async fn lookup_family(
        &self,
        host: &str,
        family: IpFamily,
    ) -> Result<AddressList, LookupFailure> {
        let mut list = AddressList::default();
        let outcome = match family {
            IpFamily::IPv4 => self.resolver.ipv4_lookup(host).await.map(|found| {
                for a in found.iter() {
                    list.push(IpAddr::V4(a.0));
                }
            }),
            IpFamily::IPv6 => self.resolver.ipv6_lookup(host).await.map(|found| {
                for aaaa in found.iter() {
                    list.push(IpAddr::V6(aaaa.0));
                }
            }),
        };
        match outcome {
            Ok(()) if list.is_empty() => Err(LookupFailure {
                no_records: true,
                error: FetchError::dns(no_records(host, family)),
            }),
            Ok(()) => Ok(list),
            Err(e) => Err(LookupFailure {
                no_records: e.is_no_records_found() && !e.is_nx_domain(),
                error: FetchError::dns(self.describe(host, family, &e)),
            }),
        }
    }

    fn describe(&self, host: &str, family: IpFamily, error: &ResolveError) -> String {
        if error.is_nx_domain() {
            return format!("cannot resolve {host}: the domain does not exist");
        }
        if error.is_no_records_found() {
            return no_records(host, family);
        }
        if let Some(why) = &self.config_error {
            return format!(
                "cannot resolve {host}: the system DNS configuration could not be read ({why})"
            );
        }
        if let Some(proto) = error.proto() {
            if matches!(
                proto.kind(),
                hickory_resolver::proto::ProtoErrorKind::Timeout
            ) {
                return format!("cannot resolve {host}: the DNS server did not answer in time");
            }
            if proto.is_no_connections() {
                return format!("cannot resolve {host}: no DNS server could be reached");
            }
        }
        format!("cannot resolve {host}: {error}")
    }
}

/// An IP literal as the only address, if the check allows its family. `what` names it
/// in the message (`the URL's host 10.0.0.1`).
pub(crate) fn literal(
    ip: IpAddr,
    family: Option<IpFamily>,
    what: &str,
) -> Result<AddressList, FetchError> {
    match (ip, family) {
        (_, None)
        | (IpAddr::V4(_), Some(IpFamily::IPv4))
        | (IpAddr::V6(_), Some(IpFamily::IPv6)) => Ok(AddressList::one(ip)),
        (IpAddr::V4(_), Some(IpFamily::IPv6)) => Err(FetchError::dns(format!(
            "{what} {ip} is an IPv4 address but the check uses IPv6"
        ))),
        (IpAddr::V6(_), Some(IpFamily::IPv4)) => Err(FetchError::dns(format!(
            "{what} {ip} is an IPv6 address but the check uses IPv4"
        ))),
    }
}

fn no_records(host: &str, family: IpFamily) -> String {
    match family {
        IpFamily::IPv4 => format!("cannot resolve {host}: it has no IPv4 (A) address"),
        IpFamily::IPv6 => format!("cannot resolve {host}: it has no IPv6 (AAAA) address"),
    }
}

/// Why a lookup of one family found nothing.
struct LookupFailure {
    /// The name exists but has no record of that family.
    no_records: bool,
    error: FetchError,
}

/// The answers of both families as one list (IPv6 first, alternating). An error only
/// when neither has an address: the IPv4 one, unless it merely found no A record.
fn merge_families(
    host: &str,
    v6: Result<AddressList, LookupFailure>,
    v4: Result<AddressList, LookupFailure>,
) -> Result<AddressList, FetchError> {
    match (v6, v4) {
        (Ok(v6), Ok(v4)) => Ok(AddressList::interleaved(v6.iter(), v4.iter())),
        (Ok(list), Err(_)) | (Err(_), Ok(list)) => Ok(list),
        (Err(v6), Err(v4)) => Err(match (v6.no_records, v4.no_records) {
            (true, true) => FetchError::dns(format!(
                "cannot resolve {host}: it has no IPv4 (A) or IPv6 (AAAA) address"
            )),
            (false, true) => v6.error,
            _ => v4.error,
        }),
    }
}

/// Up to [`MAX_ADDRESSES`] addresses, without a heap allocation.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AddressList {
    addrs: [Option<IpAddr>; MAX_ADDRESSES],
    len: usize,
}

impl AddressList {
    /// A list of one address (an IP literal in the URL).
    pub(crate) fn one(addr: IpAddr) -> AddressList {
        let mut list = AddressList::default();
        list.push(addr);
        list
    }

    /// IPv6 and IPv4 addresses alternating, starting with IPv6 (so both families get a
    /// try even when one has many addresses), up to [`MAX_ADDRESSES`].
    pub(crate) fn interleaved(
        v6: impl Iterator<Item = IpAddr>,
        v4: impl Iterator<Item = IpAddr>,
    ) -> AddressList {
        let mut list = AddressList::default();
        let (mut v6, mut v4) = (v6.fuse(), v4.fuse());
        loop {
            let (a, b) = (v6.next(), v4.next());
            if a.is_none() && b.is_none() {
                return list;
            }
            for ip in [a, b].into_iter().flatten() {
                list.push(ip);
            }
        }
    }

    /// Adds `addr` unless the list is full.
    pub(crate) fn push(&mut self, addr: IpAddr) {
        if self.len < MAX_ADDRESSES {
            self.addrs[self.len] = Some(addr);
            self.len += 1;
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.addrs[..self.len].iter().flatten().copied()
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use hickory_resolver::config::NameServerConfig;
    use hickory_resolver::proto::op::{Message, MessageType, ResponseCode};
    use hickory_resolver::proto::xfer::Protocol;
    use tokio::net::UdpSocket;

    use super::*;
    use crate::model::ErrorKind;

    #[tokio::test]
    async fn localhost_resolves_from_the_system_configuration() {
        let resolver = SystemResolver::from_system();
        let v4 = resolver.lookup("localhost", IpFamily::IPv4).await.unwrap();
        assert!(v4.iter().all(|a| a.is_ipv4() && a.is_loopback()));
        assert!(!v4.is_empty());
        let v6 = resolver.lookup("localhost", IpFamily::IPv6).await.unwrap();
        assert!(v6.iter().all(|a| a.is_ipv6() && a.is_loopback()));
    }

    #[tokio::test]
    async fn an_unpinned_lookup_gives_both_families_ipv6_first() {
        let resolver = SystemResolver::from_system();
        let list = resolver.lookup_for("localhost", None).await.unwrap();
        let found: Vec<IpAddr> = list.iter().collect();
        assert_eq!(
            found,
            vec![
                IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
                IpAddr::from(Ipv4Addr::LOCALHOST)
            ]
        );
        let v4 = resolver
            .lookup_for("localhost", Some(IpFamily::IPv4))
            .await
            .unwrap();
        assert!(v4.iter().all(|a| a.is_ipv4()));
    }

    #[test]
    fn families_alternate_ipv6_first_and_stay_bounded() {
        let v6: Vec<IpAddr> = (1..=5u16)
            .map(|i| IpAddr::from([0x2001, 0xdb8, 0, 0, 0, 0, 0, i]))
            .collect();
        let v4: Vec<IpAddr> = (1..=2u8).map(|i| IpAddr::from([192, 0, 2, i])).collect();
        let list = AddressList::interleaved(v6.iter().copied(), v4.iter().copied());
        let got: Vec<IpAddr> = list.iter().collect();
        assert_eq!(got, vec![v6[0], v4[0], v6[1], v4[1]]);
        let only_v4 = AddressList::interleaved(std::iter::empty(), v4.iter().copied());
        assert_eq!(only_v4.iter().collect::<Vec<_>>(), v4);
    }

    #[test]
    fn merged_lookups_fail_only_without_any_address() {
        let none = |family| LookupFailure {
            no_records: true,
            error: FetchError::dns(no_records("h.test", family)),
        };
        let one = AddressList::one(IpAddr::from([192, 0, 2, 1]));
        let list = merge_families("h.test", Err(none(IpFamily::IPv6)), Ok(one)).unwrap();
        assert_eq!(list.iter().count(), 1);
        let err = merge_families(
            "h.test",
            Err(none(IpFamily::IPv6)),
            Err(none(IpFamily::IPv4)),
        )
        .unwrap_err();
        assert!(
            err.message.contains("no IPv4 (A) or IPv6 (AAAA)"),
            "{}",
            err.message
        );
        let broken = LookupFailure {
            no_records: false,
            error: FetchError::dns("cannot resolve h.test: the domain does not exist"),
        };
        let err = merge_families("h.test", Err(none(IpFamily::IPv6)), Err(broken)).unwrap_err();
        assert!(err.message.contains("does not exist"), "{}", err.message);
    }

    #[test]
    fn literals_follow_the_pinned_family() {
        let v6: IpAddr = "::1".parse().unwrap();
        assert!(literal(v6, None, "the host").is_ok());
        assert!(literal(v6, Some(IpFamily::IPv6), "the host").is_ok());
        let err = literal(v6, Some(IpFamily::IPv4), "the host").unwrap_err();
        assert_eq!(
            err.message,
            "the host ::1 is an IPv6 address but the check uses IPv4"
        );
    }

    #[test]
    fn address_list_is_bounded() {
        let mut list = AddressList::default();
        for i in 0..10u8 {
            list.push(IpAddr::from([127, 0, 0, i]));
        }
        assert_eq!(list.iter().count(), MAX_ADDRESSES);
    }

    /// A DNS server on loopback that answers every query with `code` and no records.
    async fn empty_answer_server(code: ResponseCode) -> SocketAddr {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = socket.local_addr().unwrap();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 1500];
            while let Ok((n, peer)) = socket.recv_from(&mut buf).await {
                let Ok(query) = Message::from_vec(&buf[..n]) else {
                    continue;
                };
                let mut answer = Message::new();
                answer
                    .set_id(query.id())
                    .set_message_type(MessageType::Response)
                    .set_op_code(query.op_code())
                    .set_recursion_desired(query.recursion_desired())
                    .set_recursion_available(true)
                    .set_response_code(code)
                    .add_queries(query.queries().to_vec());
                let _ = socket.send_to(&answer.to_vec().unwrap(), peer).await;
            }
        });
        addr
    }

    fn resolver_using(server: SocketAddr) -> SystemResolver {
        let config = ResolverConfig::from_parts(
            None,
            Vec::new(),
            vec![NameServerConfig::new(server, Protocol::Udp)],
        );
        SystemResolver::with_config(config, ResolverOpts::default(), None)
    }

    #[tokio::test]
    async fn nxdomain_says_the_domain_does_not_exist() {
        let server = empty_answer_server(ResponseCode::NXDomain).await;
        let err = resolver_using(server)
            .lookup("nothing.example.test", IpFamily::IPv4)
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Dns);
        assert_eq!(
            err.message,
            "cannot resolve nothing.example.test: the domain does not exist"
        );
    }

    #[tokio::test]
    async fn no_records_of_the_family_says_which() {
        let server = empty_answer_server(ResponseCode::NoError).await;
        let err = resolver_using(server)
            .lookup("v4only.example.test", IpFamily::IPv6)
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Dns);
        assert!(
            err.message.contains("no IPv6 (AAAA) address"),
            "{}",
            err.message
        );
    }

    #[tokio::test]
    async fn without_a_system_configuration_names_fail_clearly_but_hosts_work() {
        let resolver = SystemResolver::with_config(
            ResolverConfig::from_parts(None, Vec::new(), Vec::new()),
            ResolverOpts::default(),
            Some("no nameservers found in config".into()),
        );
        let err = resolver
            .lookup("example.test", IpFamily::IPv4)
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Dns);
        assert!(
            err.message
                .contains("system DNS configuration could not be read"),
            "{}",
            err.message
        );
        let local = resolver.lookup("localhost", IpFamily::IPv4).await.unwrap();
        assert!(local.iter().all(|a| a.is_loopback()));
    }
}
