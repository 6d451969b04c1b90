//! The rustls server configuration: the serving certificate, and client
//! certificates requested from every client. The handshake accepts any
//! certificate whose holder proves its key; whether the client CA signed
//! it is the x509 authenticator's question, so that an expired or
//! untrusted certificate gets kube-apiserver's answer (401 with a Status)
//! instead of a failed handshake.

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, ServerConfig, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, UnixTime};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {reason}")]
    File { path: String, reason: String },
    #[error("TLS: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The crypto every TLS use here shares (ring; named, so no process-wide
/// default has to be chosen).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificates in a PEM file.
pub fn certificates(path: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bad = |reason: String| TlsError::File {
        path: path.to_string(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("no certificate in the file".into()));
    }
    Ok(certs)
}

/// Serves `cert_file` with `key_file`, asking clients for a certificate
/// and naming the client CAs of `client_ca_file` as acceptable issuers.
pub fn server_config(
    cert_file: &str,
    key_file: &str,
    client_ca_file: Option<&str>,
) -> Result<ServerConfig, TlsError> {
    let chain = certificates(cert_file)?;
    let key = PrivateKeyDer::from_pem_file(key_file).map_err(|e| TlsError::File {
        path: key_file.to_string(),
        reason: e.to_string(),
    })?;
    let hints = match client_ca_file {
        Some(file) => certificates(file)?.iter().filter_map(subject_of).collect(),
        None => Vec::new(),
    };
    let provider = provider();
    let verifier = Arc::new(AnyClientCertificate {
        hints,
        provider: provider.clone(),
    });
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

fn subject_of(cert: &CertificateDer<'_>) -> Option<DistinguishedName> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert).ok()?;
    Some(DistinguishedName::from(parsed.subject().as_raw().to_vec()))
}

/// Requests a client certificate, accepts any whose holder signs the
/// handshake with its key; the chain is judged by the authenticator.
#[derive(Debug)]
struct AnyClientCertificate {
    hints: Vec<DistinguishedName>,
    provider: Arc<CryptoProvider>,
}

impl ClientCertVerifier for AnyClientCertificate {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
