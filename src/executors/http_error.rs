//! Why a timed HTTP exchange failed, classified into the [`ErrorKind`]s of the model with
//! a one-sentence message. Messages name the host and port at most, never the URL path
//! or query (which may carry tokens).

use std::io;

use crate::model::{ErrorKind, RunError};

/// A failed step of an HTTP run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FetchError {
    pub(crate) kind: ErrorKind,
    pub(crate) message: String,
}

impl FetchError {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> FetchError {
        FetchError {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn dns(message: impl Into<String>) -> FetchError {
        FetchError::new(ErrorKind::Dns, message)
    }

    pub(crate) fn protocol(message: impl Into<String>) -> FetchError {
        FetchError::new(ErrorKind::Protocol, message)
    }

    /// A TCP connect to `target` (`host:port`) failed.
    pub(crate) fn connect(target: &str, error: &io::Error) -> FetchError {
        let why = match error.kind() {
            io::ErrorKind::ConnectionRefused => "the connection was refused".to_owned(),
            io::ErrorKind::ConnectionReset => "the connection was reset".to_owned(),
            io::ErrorKind::HostUnreachable => "the host is unreachable".to_owned(),
            io::ErrorKind::NetworkUnreachable => "the network is unreachable".to_owned(),
            io::ErrorKind::TimedOut => "the connection attempt timed out".to_owned(),
            io::ErrorKind::AddrNotAvailable => {
                "no local address can reach it (is this address family configured?)".to_owned()
            }
            _ => error.to_string(),
        };
        FetchError::new(
            ErrorKind::Connect,
            format!("cannot connect to {target}: {why}"),
        )
    }

    /// The TLS handshake with `host` failed with `error` (as tokio-rustls reports it).
    pub(crate) fn tls(host: &str, error: &io::Error) -> FetchError {
        let message = if let Some(tls) = error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            super::tls::describe_tls_error(tls, host)
        } else {
            match error.kind() {
                io::ErrorKind::UnexpectedEof => {
                    format!("{host} closed the connection during the TLS handshake")
                }
                io::ErrorKind::ConnectionReset => {
                    format!("{host} reset the connection during the TLS handshake")
                }
                _ => format!("the TLS handshake with {host} failed: {error}"),
            }
        };
        FetchError::new(ErrorKind::Tls, message)
    }

    /// An HTTP-level failure after the connection was set up.
    pub(crate) fn http(host: &str, error: &hyper::Error) -> FetchError {
        if let Some(io) = find_io_error(error) {
            if let Some(tls) = io
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            {
                return FetchError::new(ErrorKind::Tls, super::tls::describe_tls_error(tls, host));
            }
            let why = match io.kind() {
                io::ErrorKind::ConnectionReset => "the connection was reset".to_owned(),
                io::ErrorKind::BrokenPipe => "the connection was closed".to_owned(),
                io::ErrorKind::UnexpectedEof => "the connection was closed early".to_owned(),
                _ => io.to_string(),
            };
            return FetchError::protocol(format!(
                "the exchange with {host} failed: {why} while waiting for or reading the response"
            ));
        }
        let message = if error.is_parse_too_large() {
            format!("{host} sent a response head larger than the limit")
        } else if error.is_parse() || error.is_parse_status() {
            format!("{host} sent an invalid HTTP response")
        } else if error.is_incomplete_message() {
            format!("{host} closed the connection before the response was complete")
        } else {
            format!("the HTTP exchange with {host} failed: {error}")
        };
        FetchError::protocol(message)
    }
}

impl From<FetchError> for RunError {
    fn from(e: FetchError) -> RunError {
        RunError {
            kind: e.kind,
            message: e.message,
        }
    }
}

/// The I/O error at the root of a hyper error, if there is one.
pub(crate) fn find_io_error(error: &hyper::Error) -> Option<&io::Error> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<io::Error>() {
            return Some(io);
        }
        source = err.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_errors_say_what_happened() {
        let e = io::Error::from(io::ErrorKind::ConnectionRefused);
        let f = FetchError::connect("127.0.0.1:1", &e);
        assert_eq!(f.kind, ErrorKind::Connect);
        assert_eq!(
            f.message,
            "cannot connect to 127.0.0.1:1: the connection was refused"
        );
    }

    #[test]
    fn unknown_issuer_is_not_trusted() {
        let e = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let f = FetchError::tls("example.test", &e);
        assert_eq!(f.kind, ErrorKind::Tls);
        assert!(f.message.contains("not trusted"), "{}", f.message);
    }
}
