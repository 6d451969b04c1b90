//! The TLS side of a call to an extension API server: trust its
//! APIService's `caBundle` (the system's roots when it has none), or
//! nothing at all with `insecureSkipTLSVerify`; present the front-proxy
//! client certificate (`--proxy-client-cert-file`), which is what tells
//! the extension server that the X-Remote-* headers can be believed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};

use crate::admission::webhook::client::ca_bundle_roots;
use crate::serving::tls::{certificates, TlsError};

/// The front-proxy client identity: a certificate chain and its key.
pub struct ClientIdentity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl ClientIdentity {
    /// The chain at `cert` and the key at `key` (PEM files).
    pub fn from_files(cert: &str, key: &str) -> Result<ClientIdentity, TlsError> {
        use rustls::pki_types::pem::PemObject;
        let chain = certificates(cert)?;
        let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::File {
            path: key.to_string(),
            reason: e.to_string(),
        })?;
        Ok(ClientIdentity { chain, key })
    }
}

impl Clone for ClientIdentity {
    fn clone(&self) -> Self {
        ClientIdentity {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

/// How a backend is trusted: its CA bundle (PEM), or not at all.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Trust {
    Bundle(Vec<u8>),
    Insecure,
}

/// The client configurations, one per trust, built once.
pub struct Configs {
    identity: Option<ClientIdentity>,
    /// The flag that named the identity, for errors.
    flag: &'static str,
    built: Mutex<HashMap<Trust, Arc<ClientConfig>>>,
}

impl Configs {
    pub fn new(identity: Option<ClientIdentity>) -> Configs {
        Configs::for_flag(identity, "--proxy-client-cert-file")
    }

    /// The configurations presenting `identity`, which `flag` named.
    pub fn for_flag(identity: Option<ClientIdentity>, flag: &'static str) -> Configs {
        Configs {
            identity,
            flag,
            built: Mutex::new(HashMap::new()),
        }
    }

    pub fn get(&self, trust: &Trust) -> Result<Arc<ClientConfig>, String> {
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(config) = built.get(trust) {
            return Ok(config.clone());
        }
        let config = Arc::new(self.build(trust)?);
        built.insert(trust.clone(), config.clone());
        Ok(config)
    }

    fn build(&self, trust: &Trust) -> Result<ClientConfig, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let builder = match trust {
            Trust::Bundle(pem) => builder.with_root_certificates(ca_bundle_roots(pem)?),
            Trust::Insecure => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyServer(provider))),
        };
        match &self.identity {
            Some(id) => builder
                .with_client_auth_cert(id.chain.clone(), id.key.clone_key())
                .map_err(|e| format!("{}: {e}", self.flag)),
            None => Ok(builder.with_no_client_auth()),
        }
    }
}

/// `insecureSkipTLSVerify`: any certificate is accepted; the handshake's
/// signatures are still checked, so the connection is at least private
/// to whoever holds the key.
#[derive(Debug)]
struct AnyServer(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyServer {
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
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
