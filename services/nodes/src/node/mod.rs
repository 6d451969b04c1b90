//! A simulated node: its Node object, its conditions and status reports,
//! its pod CIDR and its pods' addresses, the images it has pulled.

pub mod cidr;
pub mod conditions;
pub mod images;
pub mod template;
