//! One type served in several versions over one storage version. Each
//! served version has its own strategy (its schema, columns, defaults)
//! and its own actor, whose storage is a [`Converted`] view of the
//! type's one Cacher: objects written in the request's version are
//! converted to the storage version on their way to the store, and
//! objects read (gets, lists, watch events) are converted to the
//! request's version, whatever version they were stored in (so objects
//! stored before the storage version moved stay readable). The flow runs
//! unchanged in the request's version, as kube's per-version REST
//! storage does. What converts is a [`Converter`], supplied by the
//! type (`Strategy::conversion`): no code here names a kind.
//!
//! ```text
//! converter.rs  Converter, Conversion, ConversionError, Rewrite (apiVersion only)
//! converted.rs  Converted: the storage::Interface view in one version
//! watch.rs      a watcher's items converted on their way out
//! ```

mod converted;
mod converter;
mod watch;

pub use converted::Converted;
pub use converter::{to_version, Conversion, ConversionError, Converter, Rewrite};
pub use watch::convert_items;

#[cfg(test)]
mod tests;
