//! The certificates and keys a cluster needs to start secure, made the
//! way k3s makes them on first start (real X.509 from rcgen, ECDSA P-256):
//! a CA that signs the serving certificate, a CA that signs client
//! certificates, the serving certificate for the loopback names, the host
//! name and extra SANs, the service-account signing key pair, and an
//! admin client certificate in `system:masters`. Files that exist are
//! kept, so a restart reuses them. Keys are readable by their owner only,
//! in a folder only the owner enters ([`files`]).

pub mod files;
mod store;

use std::path::{Path, PathBuf};

pub use rcgen::ExtendedKeyUsagePurpose;
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair,
    KeyUsagePurpose,
};
use time::{Duration, OffsetDateTime};

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("certificate: {0}")]
    Certificate(#[from] rcgen::Error),
}

/// A CA's certificate and key, able to sign more certificates.
pub struct Authority {
    certificate: Certificate,
    key: KeyPair,
    pub pem: String,
}

/// A certificate and its private key, as PEM.
pub struct Issued {
    pub certificate: String,
    pub key: String,
}

const CA_YEARS: i64 = 10;
const LEAF_YEARS: i64 = 1;

impl Authority {
    /// A new self-signed CA named `name`.
    pub fn generate(name: &str) -> Result<Authority, PkiError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = named(name, None);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        valid_for(&mut params, Duration::days(365 * CA_YEARS));
        let certificate = params.self_signed(&key)?;
        let pem = certificate.pem();
        Ok(Authority {
            certificate,
            key,
            pem,
        })
    }

    /// The CA in `cert_pem` with its key `key_pem`.
    pub fn load(cert_pem: &str, key_pem: &str) -> Result<Authority, PkiError> {
        let key = KeyPair::from_pem(key_pem)?;
        let params = CertificateParams::from_ca_cert_pem(cert_pem)?;
        // Re-signing the CA's own parameters gives rcgen an issuer with
        // the same name and key; the original PEM is what clients trust.
        let certificate = params.self_signed(&key)?;
        Ok(Authority {
            certificate,
            key,
            pem: cert_pem.to_string(),
        })
    }

    /// A client certificate: `user` as CN, `group` as O, valid from
    /// `not_before` for `lifetime`. (rcgen writes one value per name
    /// attribute, so such a certificate carries one group at most.)
    pub fn issue_client(
        &self,
        user: &str,
        group: Option<&str>,
        not_before: OffsetDateTime,
        lifetime: Duration,
    ) -> Result<Issued, PkiError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = named(user, group);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.not_before = not_before;
        params.not_after = not_before + lifetime;
        self.sign(params)
    }

    /// A serving certificate for `names` (DNS names and IP addresses).
    pub fn issue_serving(&self, names: &[String]) -> Result<Issued, PkiError> {
        self.issue_leaf(
            "capstan-apiserver",
            names,
            &[ExtendedKeyUsagePurpose::ServerAuth],
        )
    }

    /// A certificate named `common_name` for `names` (DNS names and IP
    /// addresses, possibly none), good for `purposes`, valid a year.
    pub fn issue_leaf(
        &self,
        common_name: &str,
        names: &[String],
        purposes: &[ExtendedKeyUsagePurpose],
    ) -> Result<Issued, PkiError> {
        let mut params = CertificateParams::new(names.to_vec())?;
        params.distinguished_name = named(common_name, None);
        params.extended_key_usages = purposes.to_vec();
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        valid_for(&mut params, Duration::days(365 * LEAF_YEARS));
        self.sign(params)
    }

    fn sign(&self, params: CertificateParams) -> Result<Issued, PkiError> {
        let key = KeyPair::generate()?;
        let certificate = params.signed_by(&key, &self.certificate, &self.key)?;
        Ok(Issued {
            certificate: certificate.pem(),
            key: key.serialize_pem(),
        })
    }

    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }
}

fn named(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    if let Some(organization) = organization {
        name.push(DnType::OrganizationName, organization);
    }
    name.push(DnType::CommonName, common_name);
    name
}

/// Valid from an hour ago (clocks differ a little) for `lifetime`.
fn valid_for(params: &mut CertificateParams, lifetime: Duration) {
    let now = OffsetDateTime::now_utc();
    params.not_before = now - Duration::hours(1);
    params.not_after = now + lifetime;
}

/// Where a cluster's certificates and keys live under its folder.
#[derive(Debug, Clone)]
pub struct Pki {
    pub dir: PathBuf,
}

/// The admin client certificate's user and group.
pub const ADMIN_USER: &str = "system:admin";
pub const ADMIN_GROUP: &str = "system:masters";
/// The front-proxy client certificate's CN (kubeadm's), the one name in
/// `--requestheader-allowed-names`.
pub const FRONT_PROXY_CLIENT: &str = "front-proxy-client";
/// The kubelet client certificate's CN (kubeadm's), the user kubelets
/// see the API server as.
pub const KUBELET_CLIENT: &str = "kube-apiserver-kubelet-client";

impl Pki {
    pub fn at(dir: &Path) -> Pki {
        Pki {
            dir: dir.to_path_buf(),
        }
    }

    pub fn server_ca(&self) -> PathBuf {
        self.dir.join("server-ca.crt")
    }
    pub fn client_ca(&self) -> PathBuf {
        self.dir.join("client-ca.crt")
    }
    pub fn serving_cert(&self) -> PathBuf {
        self.dir.join("serving.crt")
    }
    pub fn serving_key(&self) -> PathBuf {
        self.dir.join("serving.key")
    }
    pub fn service_account_key(&self) -> PathBuf {
        self.dir.join("service-account.key")
    }
    pub fn admin_cert(&self) -> PathBuf {
        self.dir.join("admin.crt")
    }
    pub fn admin_key(&self) -> PathBuf {
        self.dir.join("admin.key")
    }
    pub fn client_ca_key(&self) -> PathBuf {
        self.dir.join("client-ca.key")
    }
    /// The CA of the front-proxy client certificate (the aggregator's
    /// `--requestheader-client-ca-file`).
    pub fn front_proxy_ca(&self) -> PathBuf {
        self.dir.join("front-proxy-ca.crt")
    }
    pub fn front_proxy_client_cert(&self) -> PathBuf {
        self.dir.join("front-proxy-client.crt")
    }
    pub fn front_proxy_client_key(&self) -> PathBuf {
        self.dir.join("front-proxy-client.key")
    }
    /// The API server's client certificate toward kubelets
    /// (`--kubelet-client-certificate`), from the client CA.
    pub fn kubelet_client_cert(&self) -> PathBuf {
        self.dir.join("kubelet-client.crt")
    }
    pub fn kubelet_client_key(&self) -> PathBuf {
        self.dir.join("kubelet-client.key")
    }

    /// Makes whatever is missing; `names` are the serving certificate's
    /// names (used only when it is made).
    pub fn ensure(&self, names: &[String]) -> Result<(), PkiError> {
        create_dir(&self.dir)?;
        let server_ca = self.authority(&self.server_ca(), "server-ca.key", "capstan-server-ca")?;
        if !self.serving_cert().exists() {
            let serving = server_ca.issue_serving(names)?;
            write_pair(&self.serving_cert(), &self.serving_key(), &serving)?;
        }
        let client_ca = self.authority(&self.client_ca(), "client-ca.key", "capstan-client-ca")?;
        if !self.admin_cert().exists() {
            let admin = client_ca.issue_client(
                ADMIN_USER,
                Some(ADMIN_GROUP),
                OffsetDateTime::now_utc() - Duration::hours(1),
                Duration::days(365 * LEAF_YEARS),
            )?;
            write_pair(&self.admin_cert(), &self.admin_key(), &admin)?;
        }
        if !self.kubelet_client_cert().exists() {
            let kubelet_client = client_ca.issue_client(
                KUBELET_CLIENT,
                None,
                OffsetDateTime::now_utc() - Duration::hours(1),
                Duration::days(365 * LEAF_YEARS),
            )?;
            write_pair(
                &self.kubelet_client_cert(),
                &self.kubelet_client_key(),
                &kubelet_client,
            )?;
        }
        // A CA of its own, as kubeadm makes: a certificate that may vouch
        // for any user in headers must not be any client's certificate.
        let front_proxy_ca = self.authority(
            &self.front_proxy_ca(),
            "front-proxy-ca.key",
            "capstan-front-proxy-ca",
        )?;
        if !self.front_proxy_client_cert().exists() {
            let purposes = [ExtendedKeyUsagePurpose::ClientAuth];
            let issued = front_proxy_ca.issue_leaf(FRONT_PROXY_CLIENT, &[], &purposes)?;
            write_pair(
                &self.front_proxy_client_cert(),
                &self.front_proxy_client_key(),
                &issued,
            )?;
        }
        if !self.service_account_key().exists() {
            let key = KeyPair::generate()?;
            write_secret(&self.service_account_key(), &key.serialize_pem())?;
        }
        tighten_keys(&self.dir)
    }

    /// The client CA, to sign more client certificates with.
    pub fn client_authority(&self) -> Result<Authority, PkiError> {
        Authority::load(&read(&self.client_ca())?, &read(&self.client_ca_key())?)
    }

    /// The CA at `cert`, made (with its key beside it) if missing.
    fn authority(&self, cert: &Path, key: &str, name: &str) -> Result<Authority, PkiError> {
        let key_path = self.dir.join(key);
        if cert.exists() {
            return Authority::load(&read(cert)?, &read(&key_path)?);
        }
        let authority = Authority::generate(name)?;
        write_secret(&key_path, &authority.key_pem())?;
        write(cert, &authority.pem)?;
        Ok(authority)
    }
}

/// The names a serving certificate covers by default: loopback, the host
/// name, and the `extra` SANs.
pub fn serving_names(extra: &[String]) -> Vec<String> {
    let mut names: Vec<String> = ["127.0.0.1", "localhost", "kubernetes", "kubernetes.default"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if let Some(host) = host_name() {
        names.push(host);
    }
    for name in extra {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    names
}

fn host_name() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = name.trim();
    (!name.is_empty() && name != "localhost").then(|| name.to_string())
}

pub fn read(path: &Path) -> Result<String, PkiError> {
    std::fs::read_to_string(path).map_err(|source| PkiError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn create_dir(dir: &Path) -> Result<(), PkiError> {
    files::private_dir(dir).map_err(|source| PkiError::Io {
        path: dir.to_path_buf(),
        source,
    })
}

/// Certificates are public, but written whole like keys: half a CA
/// certificate would stop every later start.
fn write(path: &Path, text: &str) -> Result<(), PkiError> {
    files::write_whole(path, text.as_bytes(), 0o644).map_err(|source| PkiError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes a private key readable by its owner only.
fn write_secret(path: &Path, text: &str) -> Result<(), PkiError> {
    files::write_private(path, text.as_bytes()).map_err(|source| PkiError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn write_pair(cert: &Path, key: &Path, issued: &Issued) -> Result<(), PkiError> {
    write_secret(key, &issued.key)?;
    write(cert, &issued.certificate)
}

/// Keys already in `dir` (made by an older build, or copied) are
/// tightened to their owner.
fn tighten_keys(dir: &Path) -> Result<(), PkiError> {
    let io = |source| PkiError::Io {
        path: dir.to_path_buf(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.extension().is_some_and(|e| e == "key") {
            files::tighten(&path, files::PRIVATE_FILE).map_err(io)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ensure_makes_everything_once_and_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::at(dir.path());
        pki.ensure(&serving_names(&["example.test".into()]))
            .unwrap();
        let admin = read(&pki.admin_cert()).unwrap();
        let key = read(&pki.service_account_key()).unwrap();
        pki.ensure(&serving_names(&[])).unwrap();
        assert_eq!(read(&pki.admin_cert()).unwrap(), admin);
        assert_eq!(read(&pki.service_account_key()).unwrap(), key);
        let (_, pem) = x509_parser::pem::parse_x509_pem(admin.as_bytes()).unwrap();
        let cert = pem.parse_x509().unwrap();
        let subject = cert.subject().to_string();
        assert!(subject.contains("CN=system:admin"), "{subject}");
        assert!(subject.contains("O=system:masters"), "{subject}");
        let serving = read(&pki.serving_cert()).unwrap();
        let (_, pem) = x509_parser::pem::parse_x509_pem(serving.as_bytes()).unwrap();
        let names = format!("{:?}", pem.parse_x509().unwrap().subject_alternative_name());
        assert!(
            names.contains("example.test") && names.contains("IPAddress([127, 0, 0, 1])"),
            "{names}"
        );
        let proxy = read(&pki.front_proxy_client_cert()).unwrap();
        let (_, pem) = x509_parser::pem::parse_x509_pem(proxy.as_bytes()).unwrap();
        let cert = pem.parse_x509().unwrap();
        assert!(cert.subject().to_string().contains("CN=front-proxy-client"));
        assert!(cert.issuer().to_string().contains("capstan-front-proxy-ca"));
    }
}
