//! Lists: read from the type's storage at one revision (the current one,
//! any, one not older than asked, a continue token's, or an exact one),
//! page by page, filtered by label and field selectors. Behind the
//! resource actor that storage is its Cacher, which answers all but reads
//! of the past from memory.

use base64::Engine;
use serde_json::{json, Value};

use super::handle::{Handle, Page};
use crate::error::ApiError;
use crate::registry::options::ListOptions;
use crate::registry::storage_errors::{self, Reading};
use crate::registry::strategy::{field_value, supports_field, Strategy};
use crate::storage::{ListRequest, Object, Predicate, ReadAt};

/// The opaque continue token: the snapshot revision and the next key.
#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    rv: i64,
    start: String,
}

pub fn encode_token(rv: i64, start: &str) -> String {
    let json = serde_json::to_vec(&ContinueToken {
        rv,
        start: start.to_string(),
    })
    .expect("serialisable");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

fn decode_token(h: &Handle, token: &str, prefix: &str) -> Result<ContinueToken, ApiError> {
    let bad = || {
        ApiError::BadRequest("continue key is not valid: the continue token is malformed".into())
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let parsed: ContinueToken = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    // A token from another resource or namespace must not be replayed here.
    if !parsed.start.starts_with(prefix) || !parsed.start.starts_with(&h.prefix) {
        return Err(bad());
    }
    Ok(parsed)
}

/// Which state a list reads: kube's rules for `resourceVersion`,
/// `resourceVersionMatch` and `limit` (a revision with a limit and no
/// match is the legacy exact form).
fn read_at(options: &ListOptions) -> Result<ReadAt, ApiError> {
    let exact = options.resource_version_match.as_deref() == Some("Exact");
    let legacy_exact = options.limit > 0 && options.resource_version_match.is_none();
    Ok(
        match (options.resource_version.as_deref(), options.revision()?) {
            (None, _) => ReadAt::Latest,
            (_, Some(rv)) if exact || legacy_exact => ReadAt::Exact(rv),
            (_, Some(rv)) => ReadAt::NotOlderThan(rv),
            (Some(_), None) if exact => ReadAt::Latest,
            (Some(_), None) => ReadAt::Any,
        },
    )
}

/// Reads a list from the type's storage (the Cacher answers what it can
/// from memory), at one revision, filtered by the selectors; a continue
/// token reads on at its revision.
pub async fn list(
    h: &Handle,
    namespace: Option<&str>,
    options: ListOptions,
) -> Result<Page, ApiError> {
    check_fields(h, &options)?;
    let prefix = h.collection(namespace);
    let (mut at, mut start) = (read_at(&options)?, None);
    if let Some(token) = &options.continue_token {
        let token = decode_token(h, token, &prefix)?;
        (at, start) = (ReadAt::Exact(token.rv), Some(token.start));
    }
    let reading = match options.continue_token {
        Some(_) => Reading::Continue,
        None => Reading::Plain,
    };
    let wanted = |o: &Object| matches(h.strategy.as_ref(), &options, o);
    let (mut items, mut revision) = (Vec::new(), at.exact());
    loop {
        let want = if options.limit > 0 {
            options.limit - items.len() as i64
        } else {
            0
        };
        let request = ListRequest {
            start: start.as_deref(),
            at,
            limit: want,
            filter: Some(Predicate(&wanted)),
            keep_unreadable: false,
        };
        let listing = h.store.get_list(&prefix, request).await;
        let listing = listing
            .map_err(|e| storage_errors::api_error(e, h.strategy.def().target(""), reading))?;
        // A read at a past revision is reported at that revision (the
        // header says the store's current one); later pages read there.
        if revision == 0 {
            revision = listing.revision;
        }
        at = ReadAt::Exact(revision);
        items.extend(listing.items);
        start = listing.next_key;
        let full = options.limit > 0 && items.len() as i64 >= options.limit;
        if start.is_none() || full {
            let continue_token = start.as_deref().map(|s| encode_token(revision, s));
            let remaining = continue_token
                .as_ref()
                .map(|_| listing.remaining)
                .filter(|_| options.labels.is_empty() && options.fields.is_empty());
            return Ok(Page {
                items,
                revision,
                continue_token,
                remaining,
            });
        }
    }
}

/// Unsupported field selector labels are a BadRequest, as upstream says it.
pub fn check_fields(h: &Handle, options: &ListOptions) -> Result<(), ApiError> {
    for (field, _, _) in &options.fields.0 {
        if !supports_field(h.strategy.as_ref(), field) {
            let def = h.strategy.def();
            return Err(ApiError::BadRequest(format!(
                "Unable to find \"{}/{}, Resource={}\" that match label selector \"\", field selector \"{}={}\": field label not supported: {field}",
                def.group, def.version, def.resource, field, ""
            )));
        }
    }
    Ok(())
}

/// Does `obj` pass the list's selectors? Fields the object was not
/// indexed by are read from its JSON.
pub fn matches(strategy: &dyn Strategy, options: &ListOptions, obj: &Object) -> bool {
    options.labels.matches_with(|key| obj.label(key))
        && options.fields.matches(|f| match obj.field(f) {
            Some(value) => Some(value.to_string()),
            None => field_value(strategy, &obj.value(), f),
        })
}

/// The ListMeta of a page.
pub fn list_metadata(page: &Page) -> Value {
    let mut metadata = json!({"resourceVersion": page.revision.to_string()});
    if let Some(token) = &page.continue_token {
        metadata["continue"] = token.as_str().into();
    }
    if let Some(remaining) = page.remaining.filter(|r| *r > 0) {
        metadata["remainingItemCount"] = remaining.into();
    }
    metadata
}
