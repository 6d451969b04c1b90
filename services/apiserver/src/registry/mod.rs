//! The registry: one resource actor per resource type, each running the
//! same generic flow ([`flow`]) parameterised by that type's [`Strategy`].
//! Adding a type means adding a file under `kinds/` and a line in
//! [`kinds::all`], not a new flow.

pub mod actor;
#[cfg(test)]
mod admission_tests;
mod admit;
pub mod catalog;
pub mod claims;
pub mod conversion;
pub mod deletion;
pub mod flow;
#[cfg(test)]
mod flow_tests;
pub mod handle;
pub mod kinds;
pub mod listing;
pub mod lookup;
pub mod options;
pub mod storage_errors;
pub mod strategy;
pub mod subresource;
pub mod typed;

pub use catalog::Catalog;
pub use strategy::{Claim, Column, ResourceDef, Strategy};
