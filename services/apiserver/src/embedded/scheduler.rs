//! kube-scheduler in this process, as `system:kube-scheduler`, on the
//! Lease `kube-system/kube-scheduler`.

use capstan_client::informer::Informer;
use capstan_scheduler::embed::{self, Credentials, Embedded};
use k8s_openapi::api::core::v1::Pod;

use crate::config::ApiserverConfig;
use crate::rbac::component_policy::SCHEDULER_USER;

/// Starts the scheduler unless disabled, with the process's shared pod
/// informer if there is one; None (and a log line saying why) when it is
/// disabled or has no credentials.
pub fn start_scheduler(
    config: &ApiserverConfig,
    shared_pods: Option<Informer<Pod>>,
) -> Option<Embedded> {
    let settings = &config.embedded;
    let scheduler = match (&settings.scheduler, settings.disable_scheduler) {
        (Some(scheduler), false) => scheduler.clone(),
        _ => return None,
    };
    let credentials = match settings.scheduler_kubeconfig.as_str() {
        "" => super::credentials(config, SCHEDULER_USER, None).map(Credentials::Inline),
        file => Ok(Credentials::Kubeconfig(file.to_string())),
    };
    match credentials.map(|credentials| embed::start(credentials, scheduler, shared_pods)) {
        Ok(Ok(embedded)) => Some(embedded),
        Ok(Err(err)) => {
            tracing::error!(%err, "scheduler thread; not started");
            None
        }
        Err(reason) => {
            tracing::warn!(%reason, "no credentials for the in-process scheduler: not started \
                (give --scheduler-kubeconfig, or run capstan-scheduler apart)");
            None
        }
    }
}
