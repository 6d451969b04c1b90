//! What the kinds share: validation causes, table cells, defaulting, the
//! Scale view, and the strategy of kinds that are data ([`simple`]).

pub mod cells;
pub mod defaults;
pub mod scale;
pub mod simple;
pub mod validation;
