//! Claims: keys that make a value unique across the cluster, such as a
//! service's cluster IP or node port. A claim is created in the same
//! transaction as the write that takes the value and removed in the same
//! transaction as the write that gives it up, so several API servers can
//! allocate from one range without a lock, and a crash never leaves an
//! object without its claim (or a claim without its object).

use capstan_proto::etcdserverpb::response_op::Response;
use capstan_proto::etcdserverpb::{Compare, RangeRequest, RequestOp};
use serde_json::Value;

use super::kv::{self, revision_of};
use super::{StorageError, Store};

/// Where claims live under the storage prefix: `<prefix>/claims/<name>`.
pub const CLAIMS: &str = "claims";

/// What a claim holds: the owner's key and uid, so that a claim left by
/// an earlier object of the same name is not mistaken for this one's.
pub fn owner_of(key: &str, object: &Value) -> String {
    let uid = object["metadata"]["uid"].as_str().unwrap_or("");
    format!("{key} {uid}")
}

/// The compares and puts that take `claims` for `owner`.
fn claiming(owner: &str, claims: &[String]) -> (Vec<Compare>, Vec<RequestOp>) {
    let compares = claims
        .iter()
        .map(|c| kv::create_revision_is(c, 0))
        .collect();
    let puts = claims
        .iter()
        .map(|c| kv::put(c, owner.as_bytes().to_vec(), None))
        .collect();
    (compares, puts)
}

impl Store {
    /// Creates `object` at `key` together with `claims`, or tells why not:
    /// the key exists, or some claims are another object's.
    pub async fn create_claiming(
        &self,
        key: &str,
        object: &Value,
        claims: &[String],
        lease: Option<i64>,
    ) -> Result<i64, StorageError> {
        let owner = owner_of(key, object);
        let (mut compares, mut puts) = claiming(&owner, claims);
        compares.push(kv::create_revision_is(key, 0));
        // An object written under a lease goes when the lease expires.
        puts.push(kv::put(key, self.seal(key, object), lease));
        let expect = Expect {
            key,
            mod_revision: 0,
            otherwise: StorageError::Exists(key.to_string()),
        };
        self.write_claiming(&owner, compares, puts, claims, expect)
            .await
    }

    /// Replaces `object` at `key` if it was last written at
    /// `mod_revision`, taking `claims` and dropping `releases`.
    pub async fn update_claiming(
        &self,
        key: &str,
        object: &Value,
        mod_revision: i64,
        claims: &[String],
        releases: &[String],
        lease: Option<i64>,
    ) -> Result<i64, StorageError> {
        let owner = owner_of(key, object);
        let (mut compares, mut ops) = claiming(&owner, claims);
        compares.push(kv::mod_revision_is(key, mod_revision));
        ops.push(kv::put(key, self.seal(key, object), lease));
        ops.extend(releases.iter().map(|r| kv::delete(r)));
        let expect = Expect {
            key,
            mod_revision,
            otherwise: StorageError::Conflict,
        };
        self.write_claiming(&owner, compares, ops, claims, expect)
            .await
    }

    /// Deletes `key` if it was last written at `mod_revision`, with the
    /// claims it held.
    pub async fn delete_releasing(
        &self,
        key: &str,
        mod_revision: i64,
        releases: &[String],
    ) -> Result<i64, StorageError> {
        let mut ops = vec![kv::delete(key)];
        ops.extend(releases.iter().map(|r| kv::delete(r)));
        let txn = kv::txn(
            vec![kv::mod_revision_is(key, mod_revision)],
            ops,
            Vec::new(),
        );
        let response = self.txn(txn).await?;
        if !response.succeeded {
            return Err(StorageError::Conflict);
        }
        Ok(revision_of(&response.header))
    }

    /// Claims under `prefix` whose owner is gone (or is another object of
    /// the same name), with their mod_revision: claims and objects are
    /// read at one revision, so a claim written with an object that is
    /// not there yet cannot be taken for leaked.
    pub async fn leaked_claims(&self, prefix: &str) -> Result<Vec<(String, i64)>, StorageError> {
        let claims = self.range(kv::prefix_range(prefix, prefix)).await?;
        let revision = revision_of(&claims.header);
        let mut leaked = Vec::new();
        for claim in &claims.kvs {
            let owner = String::from_utf8_lossy(&claim.value).to_string();
            let (key, uid) = owner.rsplit_once(' ').unwrap_or((owner.as_str(), ""));
            let at = RangeRequest {
                key: key.as_bytes().to_vec(),
                revision,
                ..Default::default()
            };
            let found = self.range(at).await?;
            let alive = found.kvs.first().is_some_and(|kv| {
                // An object that does not decode (or decrypt) is not taken
                // for gone: its claim stays.
                self.open(key, &kv.value, kv.mod_revision)
                    .map_or(true, |stored| stored.object["metadata"]["uid"] == uid)
            });
            if !alive {
                let name = String::from_utf8_lossy(&claim.key).to_string();
                leaked.push((name, claim.mod_revision));
            }
        }
        Ok(leaked)
    }

    /// Deletes a leaked claim unless it was written again since.
    pub async fn release_claim(&self, key: &str, mod_revision: i64) -> Result<(), StorageError> {
        let txn = kv::txn(
            vec![kv::mod_revision_is(key, mod_revision)],
            vec![kv::delete(key)],
            Vec::new(),
        );
        self.txn(txn).await.map(drop)
    }

    /// On failure the else branch reads the object and every claim, so
    /// one round trip tells why: the object's own compare comes first (an
    /// existing object is AlreadyExists even if it holds the claims too),
    /// then the claims other objects hold.
    async fn write_claiming(
        &self,
        owner: &str,
        compares: Vec<Compare>,
        ops: Vec<RequestOp>,
        claims: &[String],
        expect: Expect<'_>,
    ) -> Result<i64, StorageError> {
        let mut reads = vec![kv::get(expect.key)];
        reads.extend(claims.iter().map(|c| kv::get(c)));
        let response = self.txn(kv::txn(compares, ops, reads)).await?;
        if response.succeeded {
            return Ok(revision_of(&response.header));
        }
        let mut reads = response.responses.into_iter().map(|op| match op.response {
            Some(Response::ResponseRange(read)) => read.kvs.into_iter().next(),
            _ => None,
        });
        let object_revision = reads.next().flatten().map_or(0, |kv| kv.mod_revision);
        if object_revision != expect.mod_revision {
            return Err(expect.otherwise);
        }
        let taken: Vec<String> = reads
            .flatten()
            .filter(|kv| kv.value != owner.as_bytes())
            .map(|kv| String::from_utf8_lossy(&kv.key).to_string())
            .collect();
        match taken.is_empty() {
            true => Err(expect.otherwise),
            false => Err(StorageError::Taken(taken)),
        }
    }
}

/// The state the object's own compare expects, and the error when it
/// does not hold.
struct Expect<'a> {
    key: &'a str,
    /// 0: the object must not exist.
    mod_revision: i64,
    otherwise: StorageError,
}
