//! Pure object logic on JSON values: metadata rules, selectors, patches,
//! time. No I/O here, so all of it is unit-tested in place.

pub mod apply;
pub mod limits;
pub mod managed_fields;
pub mod meta;
pub mod patch;
pub mod quantity;
pub mod selector;
pub mod strategic;
pub mod time;
