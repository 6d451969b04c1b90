//! The serving certificate of the process's HTTPS listener: from files
//! (`--tls-cert-file`, `--tls-private-key-file`), or made at start by a
//! CA of its own (as a kubelet without certificates makes a self-signed
//! one), valid for the node address and for the Service name the API
//! server's aggregator checks (`<service>.<namespace>.svc`).

use std::net::IpAddr;
use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::Error;

/// A certificate chain and its key, and the CA a client should trust.
pub struct Serving {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    /// PEM of the CA to put in the APIService's `caBundle`, when known.
    pub ca_pem: Option<String>,
}

fn tls_error(what: &str) -> impl FnOnce(String) -> Error + '_ {
    move |e| Error::Tls(format!("{what}: {e}"))
}

/// Reads the certificate and key files.
pub fn from_files(cert: &Path, key: &Path, ca: Option<&Path>) -> Result<Serving, Error> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| tls_error(&cert.display().to_string())(e.to_string()))?;
    if chain.is_empty() {
        return Err(Error::Tls(format!(
            "{}: no certificate in the file",
            cert.display()
        )));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| tls_error(&key.display().to_string())(e.to_string()))?;
    let ca_pem = ca
        .map(|path| {
            std::fs::read_to_string(path)
                .map_err(|e| tls_error(&path.display().to_string())(e.to_string()))
        })
        .transpose()?;
    Ok(Serving { chain, key, ca_pem })
}

/// Makes a CA and a serving certificate it signs, for `address` and `dns_names`.
pub fn generate(address: IpAddr, dns_names: &[String]) -> Result<Serving, Error> {
    let rcgen_error =
        |e: rcgen::Error| Error::Tls(format!("generate the serving certificate: {e}"));
    let ca_key = KeyPair::generate().map_err(rcgen_error)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(rcgen_error)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(
        DnType::CommonName,
        format!("capstan-nodes-ca@{}", chrono::Utc::now().timestamp()),
    );
    let ca = ca_params.self_signed(&ca_key).map_err(rcgen_error)?;
    let key = KeyPair::generate().map_err(rcgen_error)?;
    let mut params = CertificateParams::new(dns_names.to_vec()).map_err(rcgen_error)?;
    params.subject_alt_names.push(SanType::IpAddress(address));
    params
        .distinguished_name
        .push(DnType::CommonName, "capstan-nodes");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &ca, &ca_key).map_err(rcgen_error)?;
    Ok(Serving {
        chain: vec![cert.der().clone(), ca.der().clone()],
        key: PrivateKeyDer::try_from(key.serialize_der()).map_err(|e| Error::Tls(e.to_string()))?,
        ca_pem: Some(ca.pem()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_certificate_names_the_address_and_the_service() {
        let names = vec!["capstan-nodes.kube-system.svc".to_string()];
        let serving = generate("127.0.0.1".parse().unwrap(), &names).unwrap();
        assert_eq!(serving.chain.len(), 2);
        let (_, cert) = x509_parser::parse_x509_certificate(&serving.chain[0]).unwrap();
        let san = cert.subject_alternative_name().unwrap().unwrap().value;
        let text = format!("{san:?}");
        assert!(text.contains("capstan-nodes.kube-system.svc"), "{text}");
        assert!(
            text.contains("127.0.0.1") || text.contains("[127, 0, 0, 1]"),
            "{text}"
        );
        assert!(serving.ca_pem.unwrap().contains("BEGIN CERTIFICATE"));
    }
}
