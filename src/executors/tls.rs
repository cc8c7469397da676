//! TLS client configurations for HTTP checks, built once per process: one that verifies
//! server certificates (system roots plus an optional extra PEM bundle, the
//! `NODE_EXTRA_CA_CERTS` of the reference agent) and one that accepts any certificate
//! (`skipSSL: true`). Both use the ring provider, offer only ALPN `http/1.1` and never
//! resume sessions, so every run measures a full handshake.

use std::path::Path;
use std::sync::Arc;

use rustls::client::Resumption;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::ExecEnvError;

/// Largest extra CA bundle read from disk.
const MAX_CA_BUNDLE_BYTES: u64 = 16 * 1024 * 1024;

/// The two client configurations every HTTPS run picks from.
pub(crate) struct TlsConfigs {
    pub(crate) verifying: Arc<ClientConfig>,
    pub(crate) insecure: Arc<ClientConfig>,
}

impl TlsConfigs {
    /// Loads the system trust store and, if given, the PEM bundle at `extra_ca`.
    /// A missing, unreadable or certificate-less bundle is an error; an empty system
    /// store is only logged (the extra bundle may be all an operator trusts).
    pub(crate) fn new(extra_ca: Option<&Path>) -> Result<TlsConfigs, ExecEnvError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        for error in &native.errors {
            tracing::warn!(%error, "could not load some system CA certificates");
        }
        let (added, ignored) = roots.add_parsable_certificates(native.certs);
        tracing::debug!(added, ignored, "loaded system CA certificates");
        if let Some(path) = extra_ca {
            let extra = load_pem_bundle(path)?;
            let count = extra.len();
            for cert in extra {
                roots.add(cert).map_err(|e| ca_error(path, e.to_string()))?;
            }
            tracing::info!(path = %path.display(), count, "trusting extra CA certificates");
        }
        if roots.is_empty() {
            tracing::warn!("no trusted CA certificates: every verified HTTPS check will fail");
        }

        let verifying = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| internal_tls_error(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let insecure = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| internal_tls_error(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate {
                algorithms: provider.signature_verification_algorithms,
            }))
            .with_no_client_auth();
        Ok(TlsConfigs {
            verifying: Arc::new(finish(verifying)),
            insecure: Arc::new(finish(insecure)),
        })
    }
}

/// Settings shared by both configurations.
fn finish(mut config: ClientConfig) -> ClientConfig {
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.resumption = Resumption::disabled();
    config
}

/// Reads every certificate of a PEM file, refusing files without one.
fn load_pem_bundle(path: &Path) -> Result<Vec<CertificateDer<'static>>, ExecEnvError> {
    let size = std::fs::metadata(path)
        .map_err(|e| ca_error(path, e.to_string()))?
        .len();
    if size > MAX_CA_BUNDLE_BYTES {
        return Err(ca_error(
            path,
            format!("the file is larger than {MAX_CA_BUNDLE_BYTES} bytes"),
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| ca_error(path, e.to_string()))?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ca_error(path, format!("invalid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(ca_error(
            path,
            "the file contains no PEM certificate".into(),
        ));
    }
    Ok(certs)
}

fn ca_error(path: &Path, message: String) -> ExecEnvError {
    ExecEnvError::CaBundle {
        path: path.display().to_string(),
        message,
    }
}

/// Only reachable if the ring provider lost every protocol version, i.e. never.
fn internal_tls_error(message: String) -> ExecEnvError {
    ExecEnvError::CaBundle {
        path: "(built-in TLS configuration)".into(),
        message,
    }
}

/// `skipSSL: true`: any certificate chain is accepted, for any name, expired or not.
/// Handshake signatures are still checked against the presented certificate, as curl
/// `-k` does, so the peer must at least hold the key of the certificate it shows.
#[derive(Debug)]
struct AcceptAnyCertificate {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// A one-sentence description of a failed TLS handshake, naming the usual causes plainly.
pub(crate) fn describe_tls_error(error: &rustls::Error, host: &str) -> String {
    use rustls::CertificateError as C;
    match error {
        rustls::Error::InvalidCertificate(cert) => match cert {
            C::UnknownIssuer => format!(
                "the certificate of {host} is not trusted: it is not issued by a known certificate authority"
            ),
            C::NotValidForName | C::NotValidForNameContext { .. } => {
                format!("the certificate of {host} is not trusted: it is not valid for that name")
            }
            C::Expired | C::ExpiredContext { .. } => {
                format!("the certificate of {host} is not trusted: it has expired")
            }
            C::NotValidYet | C::NotValidYetContext { .. } => {
                format!("the certificate of {host} is not trusted: it is not valid yet")
            }
            C::Revoked => format!("the certificate of {host} is not trusted: it was revoked"),
            other => format!("the certificate of {host} is not trusted: {other}"),
        },
        rustls::Error::AlertReceived(alert) => {
            format!("{host} rejected the TLS handshake with alert {alert:?}")
        }
        rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType) => {
            format!("{host} did not answer with TLS (is it a plain http:// server?)")
        }
        rustls::Error::NoApplicationProtocol => {
            format!("{host} does not offer HTTP/1.1 over TLS")
        }
        other => format!("the TLS handshake with {host} failed: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_bundle_is_a_ca_error() {
        let err = TlsConfigs::new(Some(Path::new("/nonexistent/ca.pem")))
            .err()
            .expect("must fail");
        assert!(matches!(err, ExecEnvError::CaBundle { .. }), "{err}");
    }

    #[test]
    fn bundle_without_certificates_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let err = TlsConfigs::new(Some(&path)).err().expect("must fail");
        assert!(err.to_string().contains("no PEM certificate"), "{err}");
    }

    #[test]
    fn both_configs_offer_only_http11() {
        let configs = TlsConfigs::new(None).unwrap();
        assert_eq!(configs.verifying.alpn_protocols, vec![b"http/1.1".to_vec()]);
        assert_eq!(configs.insecure.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }
}
