//! Host name resolution for network checks: one hickory resolver per process, built from
//! the system configuration (`/etc/resolv.conf` and `/etc/hosts`). There is never a
//! fallback to a public resolver: if the system configuration cannot be read, the
//! resolver still answers from `/etc/hosts` (so `localhost` works) and every other name
//! fails with a DNS error that says why.
//!
//! Answers are cached for their TTL (at most [`MAX_POSITIVE_TTL`]), like a caching stub
//! resolver would; the `dns` phase of a run is the time the lookup really took.

use std::net::IpAddr;
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

    /// The addresses of `host` of one family (A or AAAA records only).
    pub(crate) async fn lookup(
        &self,
        host: &str,
        family: IpFamily,
    ) -> Result<AddressList, FetchError> {
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
            Ok(()) if list.is_empty() => Err(FetchError::dns(no_records(host, family))),
            Ok(()) => Ok(list),
            Err(e) => Err(FetchError::dns(self.describe(host, family, &e))),
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

fn no_records(host: &str, family: IpFamily) -> String {
    match family {
        IpFamily::IPv4 => format!("cannot resolve {host}: it has no IPv4 (A) address"),
        IpFamily::IPv6 => format!("cannot resolve {host}: it has no IPv6 (AAAA) address"),
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
    use std::net::{Ipv4Addr, SocketAddr};

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
