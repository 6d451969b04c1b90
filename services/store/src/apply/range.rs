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

    /// The first `limit` key-values of `range` ordered by modification
    /// revision; by default the whole range read and sorted.
    fn read_by_modification(
        &self,
        range: &KeyRange,
        at: i64,
        newest_first: bool,
        limit: usize,
    ) -> Result<RangeOutput> {
        let mut out = self.read_range(range, at, 0)?;
        let order = match newest_first {
            true => SortOrder::Descend,
            false => SortOrder::Ascend,
        };
        sort(&mut out.kvs, order, SortTarget::Mod);
        out.kvs.truncate(limit);
        Ok(out)
    }
}

impl RangeSource for MvccStore {
    fn read_range(&self, range: &KeyRange, at: i64, limit: usize) -> Result<RangeOutput> {
        self.range(range, at, limit)
    }

    fn read_by_modification(
        &self,
        range: &KeyRange,
        at: i64,
        newest_first: bool,
        limit: usize,
    ) -> Result<RangeOutput> {
        self.range_by_modification(range, at, newest_first, limit)
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
    let out = match limited_by_modification(req, order, target) {
        Some(newest_first) => source.read_by_modification(
            &range,
            req.revision,
            newest_first,
            req.limit as usize + 1,
        )?,
        None => read_and_sort(source, &range, req, order, target)?,
    };
    let mut kvs = out.kvs;
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

/// A limited read sorted by modification revision and nothing else (no
/// filters, not only a count) needs the values of the first `limit` keys
/// only; whether newest first.
fn limited_by_modification(
    req: &RangeRequest,
    order: SortOrder,
    target: SortTarget,
) -> Option<bool> {
    let plain = req.limit > 0 && !req.count_only && !has_filters(req);
    match (plain, target, order) {
        (true, SortTarget::Mod, SortOrder::Descend) => Some(true),
        (true, SortTarget::Mod, SortOrder::Ascend) => Some(false),
        _ => None,
    }
}

/// Reads what `req` asks for in any other shape: every key when a sort or
/// a filter must see them all, then filtered and sorted.
fn read_and_sort(
    source: &impl RangeSource,
    range: &KeyRange,
    req: &RangeRequest,
    order: SortOrder,
    target: SortTarget,
) -> Result<RangeOutput> {
    let must_see_all = order != SortOrder::None || has_filters(req);
    let fetch_limit = match (req.count_only, req.limit <= 0 || must_see_all) {
        (true, _) => 1,
        (false, true) => 0,
        (false, false) => req.limit as usize + 1,
    };
    let mut out = source.read_range(range, req.revision, fetch_limit)?;
    if req.count_only {
        out.kvs.clear();
    }
    out.kvs.retain(|kv| passes_filters(req, kv));
    sort(&mut out.kvs, order, target);
    Ok(out)
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

    /// The store read the general way: every key, then sorted.
    struct ReadAll<'a>(&'a MvccStore);

    impl RangeSource for ReadAll<'_> {
        fn read_range(&self, range: &KeyRange, at: i64, limit: usize) -> Result<RangeOutput> {
            self.0.range(range, at, limit)
        }
    }

    /// Keys, revisions and values in order, then `more` and `count`.
    fn summary(response: &RangeResponse) -> String {
        let kvs = response.kvs.iter();
        let kvs = kvs.map(|kv| (String::from_utf8_lossy(&kv.key), kv.mod_revision, &kv.value));
        let kvs: Vec<_> = kvs.collect();
        format!("{kvs:?} more={} count={}", response.more, response.count)
    }

    #[test]
    fn a_limited_read_by_modification_answers_as_reading_everything_does() {
        let dir = tempfile::tempdir().unwrap();
        let backend = crate::storage::SledBackend::open(dir.path()).unwrap();
        let store = MvccStore::open(std::sync::Arc::new(backend)).unwrap();
        let writes: [&[&str]; 4] = [&["c", "a"], &["b"], &["a", "d", "e"], &["c"]];
        for (i, keys) in writes.iter().enumerate() {
            let mut view = store.write();
            for key in *keys {
                view.put(key.as_bytes(), format!("{key}{i}").into_bytes(), 0)
                    .unwrap();
            }
            view.finish(i as u64 + 1).unwrap();
        }
        for (revision, limit, order) in [0, 3].into_iter().flat_map(|revision| {
            let orders = [SortOrder::Descend, SortOrder::Ascend];
            (1..=6).flat_map(move |limit| orders.map(|order| (revision, limit, order)))
        }) {
            let req = RangeRequest {
                key: b"a".to_vec(),
                range_end: b"z".to_vec(),
                sort_target: SortTarget::Mod as i32,
                sort_order: order as i32,
                limit,
                revision,
                ..Default::default()
            };
            let fast = execute_range(&store, &req).unwrap();
            let general = execute_range(&ReadAll(&store), &req).unwrap();
            let case = format!("revision {revision}, limit {limit}, {order:?}");
            assert_eq!(summary(&fast), summary(&general), "{case}");
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
