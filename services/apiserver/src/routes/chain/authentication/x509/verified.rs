//! Chains already verified: a client presents the same certificate on
//! every request (5,000 simulated nodes renewing their Leases do so 500
//! times a second), and checking its signature is the costliest step of
//! authenticating it. A chain that verified is remembered, by the digest
//! of its certificates, until the first of them expires (and at most
//! `REMEMBER_FOR`), so the next request of that client skips the
//! signature check. Refusals are not remembered. The memory is bounded:
//! when it is full, expired entries go, and if none had, all of them.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use ring::digest::{Context, SHA256};
use rustls_pki_types::CertificateDer;
use x509_parser::prelude::FromDer;

use crate::auth::UserInfo;

/// Chains remembered at most (more than the clients of a large cluster
/// hold at once; a full memory starts over rather than grow).
const CAPACITY: usize = 16_384;
/// How long a verification holds at most, whatever the certificates say.
const REMEMBER_FOR: Duration = Duration::from_secs(300);

type Digest = [u8; 32];

struct Entry {
    user: UserInfo,
    until: SystemTime,
}

#[derive(Default)]
pub(super) struct VerifiedChains {
    entries: Mutex<HashMap<Digest, Entry>>,
}

impl VerifiedChains {
    /// The user `chain` was verified for, if it was and still holds at `now`.
    pub(super) fn get(&self, chain: &[CertificateDer<'_>], now: SystemTime) -> Option<UserInfo> {
        let entries = self.entries.lock();
        let entry = entries.get(&digest(chain))?;
        (now < entry.until).then(|| entry.user.clone())
    }

    /// Remembers that `chain` verified, for `user`, at `now`.
    pub(super) fn insert(&self, chain: &[CertificateDer<'_>], user: &UserInfo, now: SystemTime) {
        let Some(expires) = earliest_expiry(chain) else {
            return;
        };
        let until = expires.min(now + REMEMBER_FOR);
        let mut entries = self.entries.lock();
        if entries.len() >= CAPACITY {
            entries.retain(|_, entry| now < entry.until);
            if entries.len() >= CAPACITY {
                entries.clear();
            }
        }
        let user = user.clone();
        entries.insert(digest(chain), Entry { user, until });
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.lock().len()
    }
}

/// The digest of every certificate of the chain, each length-prefixed so
/// that no two chains run together into the same bytes.
fn digest(chain: &[CertificateDer<'_>]) -> Digest {
    let mut context = Context::new(&SHA256);
    for cert in chain {
        context.update(&(cert.len() as u64).to_be_bytes());
        context.update(cert);
    }
    let mut out = [0; 32];
    out.copy_from_slice(context.finish().as_ref());
    out
}

/// When the first certificate of the chain stops being valid (none when
/// one cannot be read: such a chain is not remembered).
fn earliest_expiry(chain: &[CertificateDer<'_>]) -> Option<SystemTime> {
    let expiries = chain.iter().map(not_after).collect::<Option<Vec<_>>>()?;
    expiries.into_iter().min()
}

fn not_after(cert: &CertificateDer<'_>) -> Option<SystemTime> {
    let (_, parsed) = x509_parser::certificate::X509Certificate::from_der(cert).ok()?;
    let seconds = u64::try_from(parsed.validity().not_after.timestamp()).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::Authority;
    use rustls_pki_types::pem::PemObject;
    use time::OffsetDateTime;

    fn chain_valid_for(lifetime: time::Duration) -> Vec<CertificateDer<'static>> {
        let ca = Authority::generate("client-ca").unwrap();
        let issued = ca
            .issue_client("jane", None, OffsetDateTime::now_utc(), lifetime)
            .unwrap();
        vec![CertificateDer::from_pem_slice(issued.certificate.as_bytes()).unwrap()]
    }

    fn jane() -> UserInfo {
        UserInfo {
            name: "jane".into(),
            ..UserInfo::default()
        }
    }

    #[test]
    fn a_verified_chain_is_remembered_until_its_certificate_expires_or_for_five_minutes() {
        let now = SystemTime::now();
        let chains = VerifiedChains::default();
        let long = chain_valid_for(time::Duration::days(1));
        assert_eq!(chains.get(&long, now), None);
        chains.insert(&long, &jane(), now);
        assert_eq!(chains.get(&long, now).map(|u| u.name), Some("jane".into()));
        assert_eq!(chains.get(&long, now + REMEMBER_FOR), None);
        // A certificate about to expire is remembered only until it does.
        let short = chain_valid_for(time::Duration::seconds(30));
        chains.insert(&short, &jane(), now);
        assert!(chains.get(&short, now).is_some());
        assert_eq!(chains.get(&short, now + Duration::from_secs(31)), None);
        // Another certificate of the same name is another chain.
        let other = chain_valid_for(time::Duration::days(1));
        assert_eq!(chains.get(&other, now), None);
    }

    #[test]
    fn a_full_memory_drops_the_expired_then_starts_over() {
        let now = SystemTime::now();
        let chains = VerifiedChains::default();
        let chain = chain_valid_for(time::Duration::days(1));
        for n in 0..CAPACITY {
            let fake = [CertificateDer::from(n.to_be_bytes().to_vec())];
            chains.entries.lock().insert(
                digest(&fake),
                Entry {
                    user: jane(),
                    until: now + Duration::from_secs(n as u64 % 2),
                },
            );
        }
        // Half of them (until == now) have expired and make room.
        chains.insert(&chain, &jane(), now);
        assert_eq!(chains.len(), CAPACITY / 2 + 1);
        assert!(chains.get(&chain, now).is_some());
    }
}
