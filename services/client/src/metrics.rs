//! The process-wide Prometheus registry the client machinery reports
//! into (client-go keeps its workqueue and reflector metrics global the
//! same way). A component adds its own families with [`register`] and
//! serves everything with [`encode`] (the health server does).

use std::sync::OnceLock;

use parking_lot::Mutex;
use prometheus_client::encoding::text;
use prometheus_client::registry::{Metric, Registry};

fn registry() -> &'static Mutex<Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(Registry::default()))
}

/// Adds a metric family to the process-wide registry. Register each
/// family once (keep it in a `OnceLock`); label values tell users apart.
pub fn register(name: &str, help: &str, metric: impl Metric) {
    registry().lock().register(name, help, metric);
}

/// Every registered family in the Prometheus text format.
pub fn encode() -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = text::encode(&mut out, &registry().lock());
    out
}
