//! TLS for the tests' local peers: server configs from rcgen certificates (self-signed,
//! or signed by a test CA whose PEM is what `NODE_EXTRA_CA_CERTS` names), and an axum
//! listener that handshakes inline.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// The names every test certificate is for.
fn local_names() -> Vec<String> {
    vec!["localhost".to_owned(), "127.0.0.1".to_owned()]
}

/// A TLS server config (ring, HTTP/1.1 by ALPN) for `chain` and `key`.
pub fn acceptor(chain: Vec<CertificateDer<'static>>, key: PrivateKeyDer<'static>) -> TlsAcceptor {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    TlsAcceptor::from(Arc::new(config))
}

/// An acceptor with a fresh self-signed certificate for localhost and 127.0.0.1.
pub fn self_signed() -> TlsAcceptor {
    let certified = rcgen::generate_simple_self_signed(local_names()).unwrap();
    let key = PrivatePkcs8KeyDer::from(certified.key_pair.serialize_der()).into();
    acceptor(vec![certified.cert.der().clone()], key)
}

/// A test CA (its PEM in a file) and a certificate it signed for localhost and
/// 127.0.0.1.
pub struct TestPki {
    pub ca_pem_path: PathBuf,
    leaf: CertificateDer<'static>,
    leaf_key: PrivateKeyDer<'static>,
}

impl TestPki {
    /// Writes the CA's PEM into `dir` as `file`.
    pub fn new(dir: &Path, file: &str) -> TestPki {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "Outpost test CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_key = KeyPair::generate().unwrap();
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let leaf_params = CertificateParams::new(local_names()).unwrap();
        let leaf_key = KeyPair::generate().unwrap();
        let leaf = leaf_params.signed_by(&leaf_key, &ca, &ca_key).unwrap();
        let ca_pem_path = dir.join(file);
        std::fs::write(&ca_pem_path, ca.pem()).unwrap();
        TestPki {
            ca_pem_path,
            leaf: leaf.der().clone(),
            leaf_key: PrivatePkcs8KeyDer::from(leaf_key.serialize_der()).into(),
        }
    }

    /// An acceptor presenting the CA-signed certificate.
    pub fn acceptor(&self) -> TlsAcceptor {
        acceptor(vec![self.leaf.clone()], self.leaf_key.clone_key())
    }
}

/// Serves `app` over TLS with `acceptor` on 127.0.0.1 (a free port) until the test ends.
pub async fn serve(acceptor: TlsAcceptor, app: Router) -> SocketAddr {
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(TlsListener { tcp, acceptor }, app).await;
    });
    addr
}

/// A TLS listener for axum: handshakes inline and skips connections that fail one.
struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, peer)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, peer);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
