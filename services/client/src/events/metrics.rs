//! Event recording metrics.

use std::sync::OnceLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::metrics::register;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    outcome: &'static str,
}

fn family() -> &'static Family<Outcome, Counter> {
    static FAMILY: OnceLock<Family<Outcome, Counter>> = OnceLock::new();
    FAMILY.get_or_init(|| {
        let family = Family::default();
        register(
            "events_recorded",
            "Events by outcome: created, patched, filtered (spam), dropped (buffer full), failed (gave up writing)",
            family.clone(),
        );
        family
    })
}

fn count(outcome: &'static str) {
    family().get_or_create(&Outcome { outcome }).inc();
}

pub(super) fn dropped() {
    count("dropped");
}
pub(super) fn created() {
    count("created");
}
pub(super) fn patched() {
    count("patched");
}
pub(super) fn filtered() {
    count("filtered");
}
pub(super) fn failed() {
    count("failed");
}
