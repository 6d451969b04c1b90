//! A kind that exists for the tests only, to show (and keep true) that a
//! kind and its subresources are declared in their own folder: this one
//! adds `widgets` in `example.capstan.dev/v1` with `status` and a
//! `polish` subresource, and neither the flow, the routes nor discovery
//! name it. A real kind would add one line to its group's `all()`.

pub mod polish;
#[cfg(test)]
mod tests;
pub mod widgets;
