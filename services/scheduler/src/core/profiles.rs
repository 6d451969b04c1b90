//! The profiles by scheduler name: which framework schedules a pod, and
//! whether this scheduler is responsible for it at all.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::config::{FieldError, SchedulerConfig};
use crate::framework::{ClusterEvent, ClusterLister, Framework, Status};
use crate::model::PodInfo;
use crate::queue::QueueHooks;
use crate::registry::in_tree_registry;

pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

pub struct Profiles {
    by_name: HashMap<String, Arc<Framework>>,
    percentage_of_nodes_to_score: i32,
}

impl Profiles {
    pub fn build(
        config: &SchedulerConfig,
        lister: Arc<dyn ClusterLister>,
    ) -> Result<Profiles, FieldError> {
        let registry = in_tree_registry();
        let mut by_name = HashMap::new();
        for profile in &config.profiles {
            let framework = Framework::new(profile, &registry, lister.clone())?;
            by_name.insert(profile.scheduler_name.clone(), Arc::new(framework));
        }
        Ok(Profiles {
            by_name,
            percentage_of_nodes_to_score: config.percentage_of_nodes_to_score,
        })
    }

    /// The framework for the pod's `schedulerName` (unset means default-scheduler).
    pub fn for_pod(&self, pod: &PodInfo) -> Option<&Arc<Framework>> {
        let name = pod
            .spec()
            .scheduler_name
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or(DEFAULT_SCHEDULER_NAME);
        self.by_name.get(name)
    }

    pub fn responsible_for(&self, pod: &PodInfo) -> bool {
        self.for_pod(pod).is_some()
    }

    /// The profile's percentage, else the configuration's (0: adaptive).
    pub fn percentage(&self, framework: &Framework) -> i32 {
        framework
            .percentage_of_nodes_to_score
            .unwrap_or(self.percentage_of_nodes_to_score)
    }

    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.by_name.keys().cloned().collect();
        names.sort();
        names
    }
}

impl QueueHooks for Profiles {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        match self.for_pod(pod) {
            Some(framework) => framework.run_pre_enqueue(pod),
            None => Status::unresolvable("no profile for the pod's schedulerName"),
        }
    }

    fn events_for(&self, pod: &PodInfo, plugins: &BTreeSet<&'static str>) -> Vec<ClusterEvent> {
        self.for_pod(pod)
            .map(|f| f.events_for(plugins))
            .unwrap_or_default()
    }
}
