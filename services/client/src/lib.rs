//! capstan-client: the API-client machinery Capstan's controllers,
//! scheduler and simulated nodes share, built on kube-rs. It never
//! imports the API server: components reach the API over HTTPS, in the
//! API server's process too.
//!
//! A component's life, in the order it uses the modules:
//!
//! 1. [`connect`]: a [`connect::Connection`] from `--kubeconfig` (or
//!    inline credentials in process), with its user agent and
//!    `--kube-api-qps` / `--kube-api-burst`; `kube::Client`s from it, some
//!    impersonating other users over the same connections.
//! 2. [`leader`]: wait to lead on a Lease; stop at once when leadership is lost.
//! 3. [`informer`]: one [`informer::Informers`] per process; shared
//!    informers per type feed caches and handlers.
//! 4. [`queue`]: handlers put keys on a [`queue::WorkQueue`];
//!    [`queue::run_workers`] processes them with retries.
//! 5. [`events`]: an [`events::EventRecorder`] writes what `kubectl describe` shows.
//! 6. [`health`] and [`metrics`]: `/healthz`, `/readyz`, `/metrics`.
//!
//! [`embed`] runs a component on a thread and runtime of its own inside
//! another process (the API server's, as k3s does).
//!
//! Unit tests use [`testing::FakeApi`] (feature `testing`), an in-memory
//! Kubernetes API any `kube::Client` can be built on.
#![deny(missing_docs)]

pub mod connect;
pub mod embed;
pub mod error;
pub mod events;
pub mod flags;
pub mod health;
pub mod informer;
pub mod leader;
pub mod metrics;
pub mod queue;
pub mod rate;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use error::{Error, Result};
pub use k8s_openapi;
pub use kube;
