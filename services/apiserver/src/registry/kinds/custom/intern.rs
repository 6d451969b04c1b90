//! Names of types defined at run time as the `'static` strings resource
//! definitions hold. Each distinct text is kept once for the life of the
//! process, so re-creating a CRD reuses its names instead of leaking more.

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};

static TEXTS: LazyLock<Mutex<HashSet<&'static str>>> = LazyLock::new(Default::default);
static LISTS: LazyLock<Mutex<HashSet<&'static [&'static str]>>> = LazyLock::new(Default::default);
type Pairs = &'static [(&'static str, &'static str)];
static PAIRS: LazyLock<Mutex<HashSet<Pairs>>> = LazyLock::new(Default::default);

pub fn text(s: &str) -> &'static str {
    let mut texts = TEXTS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(kept) = texts.get(s) {
        return kept;
    }
    let kept: &'static str = Box::leak(s.to_string().into_boxed_str());
    texts.insert(kept);
    kept
}

pub fn list(items: &[String]) -> &'static [&'static str] {
    let items: Vec<&'static str> = items.iter().map(|s| text(s)).collect();
    let mut lists = LISTS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(kept) = lists.get(items.as_slice()) {
        return kept;
    }
    let kept: &'static [&'static str] = Box::leak(items.into_boxed_slice());
    lists.insert(kept);
    kept
}

/// Pairs of texts (a field selector label and the JSON pointer it reads).
pub fn pairs(items: &[(String, String)]) -> Pairs {
    let items: Vec<(&'static str, &'static str)> =
        items.iter().map(|(a, b)| (text(a), text(b))).collect();
    let mut pairs = PAIRS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(kept) = pairs.get(items.as_slice()) {
        return kept;
    }
    let kept: Pairs = Box::leak(items.into_boxed_slice());
    pairs.insert(kept);
    kept
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_same_text_is_kept_once() {
        let a = super::text("widgets");
        let b = super::text(&String::from("widgets"));
        assert!(std::ptr::eq(a, b));
        let l = super::list(&["w".into(), "wd".into()]);
        assert!(std::ptr::eq(l, super::list(&["w".into(), "wd".into()])));
        let pair = [("spec.color".to_string(), "/spec/color".to_string())];
        assert!(std::ptr::eq(super::pairs(&pair), super::pairs(&pair)));
    }
}
