//! The store's own certificates, kept apart from the API server's as
//! kubeadm and k3s keep etcd's: a CA of its own (so a Kubernetes client
//! certificate cannot reach the store directly), one certificate per
//! member that it serves to clients and presents to its peers, and the
//! client certificate the API server (or etcdctl) presents to the store.

use std::path::PathBuf;

use super::{create_dir, tighten_keys, write_pair, ExtendedKeyUsagePurpose, Pki, PkiError};

/// Who the store's client certificate names.
const STORE_CLIENT: &str = "kube-apiserver-etcd-client";

impl Pki {
    pub fn store_dir(&self) -> PathBuf {
        self.dir.join("etcd")
    }
    pub fn store_ca(&self) -> PathBuf {
        self.store_dir().join("ca.crt")
    }
    pub fn store_member_cert(&self, member: &str) -> PathBuf {
        self.store_dir().join(format!("{member}.crt"))
    }
    pub fn store_member_key(&self, member: &str) -> PathBuf {
        self.store_dir().join(format!("{member}.key"))
    }
    pub fn store_client_cert(&self) -> PathBuf {
        self.store_dir().join("client.crt")
    }
    pub fn store_client_key(&self) -> PathBuf {
        self.store_dir().join("client.key")
    }

    /// Makes whatever is missing of the store's certificates: the CA, the
    /// client certificate, and one certificate per `(member, names)`
    /// (its DNS names and IP addresses; used only when it is made).
    pub fn ensure_store(&self, members: &[(String, Vec<String>)]) -> Result<(), PkiError> {
        create_dir(&self.store_dir())?;
        let ca = self.authority(&self.store_ca(), "etcd/ca.key", "capstan-etcd-ca")?;
        for (member, names) in members {
            if self.store_member_cert(member).exists() {
                continue;
            }
            // A member is a server to clients and peers and a client of
            // its peers, so its one certificate serves both ends.
            let purposes = [
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ];
            let issued = ca.issue_leaf(member, names, &purposes)?;
            write_pair(
                &self.store_member_cert(member),
                &self.store_member_key(member),
                &issued,
            )?;
        }
        if !self.store_client_cert().exists() {
            let issued =
                ca.issue_leaf(STORE_CLIENT, &[], &[ExtendedKeyUsagePurpose::ClientAuth])?;
            write_pair(&self.store_client_cert(), &self.store_client_key(), &issued)?;
        }
        tighten_keys(&self.store_dir())
    }
}

#[cfg(test)]
mod tests {
    use super::super::read;
    use super::*;

    #[test]
    fn store_certificates_are_made_once_per_member() {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::at(dir.path());
        let names = vec!["127.0.0.1".to_string(), "store1".to_string()];
        pki.ensure_store(&[("store1".into(), names.clone())])
            .unwrap();
        let member = read(&pki.store_member_cert("store1")).unwrap();
        let client = read(&pki.store_client_cert()).unwrap();
        pki.ensure_store(&[("store1".into(), names), ("store2".into(), vec![])])
            .unwrap();
        assert_eq!(read(&pki.store_member_cert("store1")).unwrap(), member);
        assert_eq!(read(&pki.store_client_cert()).unwrap(), client);
        assert!(pki.store_member_cert("store2").exists());
        let (_, pem) = x509_parser::pem::parse_x509_pem(member.as_bytes()).unwrap();
        let cert = pem.parse_x509().unwrap();
        let names = format!("{:?}", cert.subject_alternative_name());
        assert!(names.contains("store1"), "{names}");
        let (_, pem) = x509_parser::pem::parse_x509_pem(client.as_bytes()).unwrap();
        let subject = pem.parse_x509().unwrap().subject().to_string();
        assert!(
            subject.contains("CN=kube-apiserver-etcd-client"),
            "{subject}"
        );
    }
}
