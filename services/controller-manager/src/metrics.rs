//! The controller manager's own metrics, beside the work queues' and
//! informers' (which the client crate reports): whether this process
//! leads, each controller's sync outcomes, and the pods the workload
//! controllers created and deleted. Labels are controller names and fixed
//! words: a bounded set.

use std::sync::OnceLock;

use capstan_client::metrics::register;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabel {
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SyncLabels {
    controller: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PodLabels {
    controller: String,
    action: String,
}

struct Families {
    leader: Family<LeaseLabel, Gauge>,
    syncs: Family<SyncLabels, Counter>,
    pods: Family<PodLabels, Counter>,
}

fn families() -> &'static Families {
    static FAMILIES: OnceLock<Families> = OnceLock::new();
    FAMILIES.get_or_init(|| {
        let f = Families {
            leader: Family::default(),
            syncs: Family::default(),
            pods: Family::default(),
        };
        register(
            "leader_election_master_status",
            "1 while this process leads the named lease, 0 otherwise",
            f.leader.clone(),
        );
        register(
            "controller_manager_syncs",
            "Syncs of one object by each controller, by result (success, error)",
            f.syncs.clone(),
        );
        register(
            "controller_manager_pod_writes",
            "Pods created and deleted by each controller (created, create_failed, deleted)",
            f.pods.clone(),
        );
        f
    })
}

/// Whether this process holds the lease `name`.
pub fn set_leader(name: &str, leading: bool) {
    let label = LeaseLabel {
        name: name.to_string(),
    };
    families()
        .leader
        .get_or_create(&label)
        .set(i64::from(leading));
}

/// One sync of `controller` ended with `ok` or not.
pub fn sync(controller: &str, ok: bool) {
    let labels = SyncLabels {
        controller: controller.to_string(),
        result: if ok { "success" } else { "error" }.to_string(),
    };
    families().syncs.get_or_create(&labels).inc();
}

/// `count` pods of `controller` had `action` done to them.
pub fn pods(controller: &str, action: &'static str, count: usize) {
    let labels = PodLabels {
        controller: controller.to_string(),
        action: action.to_string(),
    };
    families().pods.get_or_create(&labels).inc_by(count as u64);
}
