//! Range requests: etcd's options (sort, limit, filters, keys/count only) on
//! top of an MVCC read.

use capstan_proto::etcdserverpb::range_request::{SortOrder, SortTarget};
use capstan_proto::etcdserverpb::{RangeRequest, RangeResponse, ResponseHeader};
use capstan_proto::mvccpb::KeyValue;

use crate::error::Result;
use crate::mvcc::{KeyRange, MvccStore, RangeOutput, WriteView};

/// Anything a range can be read from: the store, or a write view in a txn.
pub trait RangeSource {
    fn read_range(&self, range: &KeyRange, at: i64, limit: usize) -> Result<RangeOutput>;
}

impl RangeSource for MvccStore {
    fn read_range(&self, range: &KeyRange, at: i64, limit: usize) -> Result<RangeOutput> {
        self.range(range, at, limit)
    }
}

impl RangeSource for WriteView<'_> {
    fn read_range(&self, range: &KeyRange, at: i64, limit: usize) -> Result<RangeOutput> {
        self.range(range, at, limit)
    }
}

fn has_filters(req: &RangeRequest) -> bool {
    req.min_mod_revision != 0
        || req.max_mod_revision != 0
        || req.min_create_revision != 0
        || req.max_create_revision != 0
}

/// The sort a request really asks for: a non-key target with no order sorts
/// ascending, as in etcd; a key-ascending sort is the natural order.
fn effective_sort(req: &RangeRequest) -> (SortOrder, SortTarget) {
    let target = SortTarget::try_from(req.sort_target).unwrap_or(SortTarget::Key);
    let mut order = SortOrder::try_from(req.sort_order).unwrap_or(SortOrder::None);
    if target != SortTarget::Key && order == SortOrder::None {
        order = SortOrder::Ascend;
    }
    if target == SortTarget::Key && order == SortOrder::Ascend {
        order = SortOrder::None;
    }
    (order, target)
}

/// Runs `req` against `source`.
pub fn execute_range(source: &impl RangeSource, req: &RangeRequest) -> Result<RangeResponse> {
    let range = KeyRange::new(&req.key, &req.range_end);
    let (order, target) = effective_sort(req);
    let must_see_all = order != SortOrder::None || has_filters(req);
    let fetch_limit = if req.limit <= 0 || must_see_all {
        0
    } else {
        req.limit as usize + 1
    };
    let fetch_limit = if req.count_only { 1 } else { fetch_limit };
    let out = source.read_range(&range, req.revision, fetch_limit)?;
    let mut kvs = out.kvs;
    if req.count_only {
        kvs.clear();
    }
    kvs.retain(|kv| passes_filters(req, kv));
    sort(&mut kvs, order, target);
    let mut more = false;
    if req.limit > 0 && kvs.len() > req.limit as usize {
        kvs.truncate(req.limit as usize);
        more = true;
    }
    if req.keys_only {
        kvs.iter_mut().for_each(|kv| kv.value.clear());
    }
    Ok(RangeResponse {
        header: Some(ResponseHeader {
            revision: out.current_rev,
            ..Default::default()
        }),
        kvs,
        more,
        count: out.count,
    })
}

fn passes_filters(req: &RangeRequest, kv: &KeyValue) -> bool {
    let above = |value: i64, min: i64| min == 0 || value >= min;
    let below = |value: i64, max: i64| max == 0 || value <= max;
    above(kv.mod_revision, req.min_mod_revision)
        && below(kv.mod_revision, req.max_mod_revision)
        && above(kv.create_revision, req.min_create_revision)
        && below(kv.create_revision, req.max_create_revision)
}

fn sort(kvs: &mut [KeyValue], order: SortOrder, target: SortTarget) {
    if order == SortOrder::None {
        return;
    }
    // Stable sorts keep key order among equal targets.
    match target {
        SortTarget::Key => kvs.sort_by(|a, b| a.key.cmp(&b.key)),
        SortTarget::Version => kvs.sort_by_key(|kv| kv.version),
        SortTarget::Create => kvs.sort_by_key(|kv| kv.create_revision),
        SortTarget::Mod => kvs.sort_by_key(|kv| kv.mod_revision),
        SortTarget::Value => kvs.sort_by(|a, b| a.value.cmp(&b.value)),
    }
    if order == SortOrder::Descend {
        kvs.reverse();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str, value: &str, rev: i64) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: value.into(),
            mod_revision: rev,
            create_revision: rev,
            version: 1,
            lease: 0,
        }
    }

    #[test]
    fn sort_by_value_descending() {
        let mut kvs = vec![kv("a", "2", 2), kv("b", "3", 3), kv("c", "1", 4)];
        sort(&mut kvs, SortOrder::Descend, SortTarget::Value);
        let keys: Vec<_> = kvs.iter().map(|kv| kv.key.clone()).collect();
        assert_eq!(keys, vec![b"b".to_vec(), b"a".to_vec(), b"c".to_vec()]);
    }

    #[test]
    fn target_without_order_sorts_ascending() {
        let req = RangeRequest {
            sort_target: SortTarget::Mod as i32,
            ..Default::default()
        };
        assert_eq!(effective_sort(&req), (SortOrder::Ascend, SortTarget::Mod));
    }

    #[test]
    fn revision_filters() {
        let req = RangeRequest {
            min_mod_revision: 3,
            max_create_revision: 3,
            ..Default::default()
        };
        assert!(!passes_filters(&req, &kv("a", "", 2)));
        assert!(passes_filters(&req, &kv("a", "", 3)));
        assert!(!passes_filters(&req, &kv("a", "", 4)));
    }
}
