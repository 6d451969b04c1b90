//! Real X.509 certificates for TLS tests, made with rcgen and written as
//! PEM files: a CA, serving certificates for loopback, client certificates.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};

/// A certificate authority that signs the others.
pub struct Authority {
    cert: Certificate,
    key: KeyPair,
    pub cert_file: PathBuf,
}

/// A certificate and its key, as files.
pub struct Pair {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

impl Authority {
    pub fn new(dir: &Path, name: &str) -> Authority {
        let key = KeyPair::generate().expect("a CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).expect("a self-signed CA");
        let cert_file = dir.join(format!("{name}.crt"));
        std::fs::write(&cert_file, cert.pem()).expect("write the CA");
        Authority {
            cert,
            key,
            cert_file,
        }
    }

    /// For a member: serves 127.0.0.1 and localhost, and is presented as a
    /// client to its peers.
    pub fn server(&self, dir: &Path, name: &str) -> Pair {
        let sans = vec!["127.0.0.1".to_string(), "localhost".to_string()];
        let usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        self.issue(dir, name, sans, usages)
    }

    /// A serving certificate for the names (DNS names or IP addresses)
    /// in `sans`.
    pub fn serving(&self, dir: &Path, name: &str, sans: &[&str]) -> Pair {
        let sans = sans.iter().map(|s| s.to_string()).collect();
        self.issue(dir, name, sans, vec![ExtendedKeyUsagePurpose::ServerAuth])
    }

    /// For a client; the common name is the user.
    pub fn client(&self, dir: &Path, name: &str) -> Pair {
        self.issue(
            dir,
            name,
            Vec::new(),
            vec![ExtendedKeyUsagePurpose::ClientAuth],
        )
    }

    fn issue(
        &self,
        dir: &Path,
        name: &str,
        sans: Vec<String>,
        usages: Vec<ExtendedKeyUsagePurpose>,
    ) -> Pair {
        let key = KeyPair::generate().expect("a key");
        let mut params = CertificateParams::new(sans).expect("certificate params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = usages;
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("sign the certificate");
        let pair = Pair {
            cert_file: dir.join(format!("{name}.crt")),
            key_file: dir.join(format!("{name}.key")),
        };
        std::fs::write(&pair.cert_file, cert.pem()).expect("write the certificate");
        std::fs::write(&pair.key_file, key.serialize_pem()).expect("write the key");
        pair
    }
}
