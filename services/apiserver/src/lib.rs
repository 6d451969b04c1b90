//! capstan-apiserver: the Kubernetes REST API over an etcd-v3 store.
//!
//! A request flows gateway → registry → storage:
//! - [`routes`] (actix-web) decodes the URL into a request description
//!   ([`routes::request_info`]), the body ([`codec`]) and the options, and
//!   sends a message to the resource type's actor;
//! - [`registry`]: one [`registry::actor::ResourceActor`] per type, owning
//!   the type's [`registry::Strategy`] and its [`cache::WatchCache`], and
//!   running the generic [`registry::flow`] as futures;
//! - [`storage`] speaks the etcd v3 API (compare-and-swap on revisions).
//!
//! [`run`] serves until a shutdown future completes; the `capstan` binary
//! embeds it next to a store member.

pub mod admission;
pub mod aggregator;
pub mod audit;
pub mod auth;
pub mod bootstrap;
pub mod cache;
pub mod codec;
pub mod config;
pub mod controllers;
pub mod embedded;
pub mod error;
pub mod expression;
pub mod flowcontrol;
pub mod kubelet_client;
pub mod metrics;
pub mod node_authorizer;
pub mod object;
pub mod pki;
pub mod rbac;
pub mod registry;
pub mod routes;
pub mod serviceaccount;
pub mod serving;
pub mod startup;
pub mod storage;

pub use startup::{run, run_with_store, StartError};
