//! Informer metrics, labelled by resource (`plural` for the core group,
//! `group/plural` otherwise: bounded by the types a process watches).

use std::sync::OnceLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use crate::metrics::register;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabel {
    resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabel {
    resource: String,
    r#type: &'static str,
}

struct Families {
    events: Family<EventLabel, Counter>,
    relists: Family<ResourceLabel, Counter>,
    errors: Family<ResourceLabel, Counter>,
    objects: Family<ResourceLabel, Gauge>,
}

fn families() -> &'static Families {
    static FAMILIES: OnceLock<Families> = OnceLock::new();
    FAMILIES.get_or_init(|| {
        let f = Families {
            events: Family::default(),
            relists: Family::default(),
            errors: Family::default(),
            objects: Family::default(),
        };
        register(
            "informer_events",
            "Changes informers applied to their caches, by type (added, updated, deleted)",
            f.events.clone(),
        );
        register(
            "informer_relists",
            "Full relists after the first (a watch that could not resume)",
            f.relists.clone(),
        );
        register(
            "informer_watch_errors",
            "List or watch failures informers retried",
            f.errors.clone(),
        );
        register(
            "informer_objects",
            "Objects in informers' caches",
            f.objects.clone(),
        );
        f
    })
}

/// One informer's handles.
#[derive(Clone)]
pub(super) struct InformerMetrics {
    added: Counter,
    updated: Counter,
    deleted: Counter,
    relists: Counter,
    errors: Counter,
    objects: Gauge,
}

impl InformerMetrics {
    pub(super) fn new(resource: &str) -> InformerMetrics {
        let f = families();
        let label = ResourceLabel {
            resource: resource.to_string(),
        };
        let event = |t| {
            f.events
                .get_or_create(&EventLabel {
                    resource: resource.to_string(),
                    r#type: t,
                })
                .clone()
        };
        InformerMetrics {
            added: event("added"),
            updated: event("updated"),
            deleted: event("deleted"),
            relists: f.relists.get_or_create(&label).clone(),
            errors: f.errors.get_or_create(&label).clone(),
            objects: f.objects.get_or_create(&label).clone(),
        }
    }

    pub(super) fn added(&self) {
        self.added.inc();
    }
    pub(super) fn updated(&self) {
        self.updated.inc();
    }
    pub(super) fn deleted(&self) {
        self.deleted.inc();
    }
    pub(super) fn relisted(&self) {
        self.relists.inc();
    }
    pub(super) fn failed(&self) {
        self.errors.inc();
    }
    pub(super) fn objects(&self, n: usize) {
        self.objects.set(i64::try_from(n).unwrap_or(i64::MAX));
    }
}
