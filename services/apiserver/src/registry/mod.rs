//! The registry: one resource actor per kind ([`actor`]) owning its watch
//! cache, and requests ([`requests`]) running the same generic flow
//! ([`flow`]) over that storage, parameterised by
//! the kind's [`Strategy`] (decisions: decoding, defaults, validation,
//! tables) and its [`ResourceDef`] (data: names, scope, subresources,
//! deletion rules, unique values, write checks). [`Catalog`] starts and
//! finds the actors; [`kinds`] is every built-in kind, by API group.
//!
//! Adding a kind means a file (or folder) in its group's folder under
//! `kinds/` and a line in that group's `all()`; a kind's subresource is
//! an entry of its definition's table and, unless it is `status` or
//! `scale`, a [`subresource::Handler`] beside the kind. Neither the flow,
//! the routes nor discovery change.

pub mod actor;
pub mod catalog;
pub mod conversion;
pub mod definition;
pub mod flow;
pub mod kinds;
pub mod lookup;
pub mod options;
pub mod requests;
pub mod storage_errors;
pub mod strategy;
pub mod subresource;
pub mod typed;

pub use catalog::Catalog;
pub use definition::{Claim, ResourceDef};
pub use strategy::{Column, Strategy};
