//! What a cached pod can do without. The controller manager and the
//! scheduler each cache every pod, and much of a decoded pod is what only
//! the kubelet reads: its containers' environment, command, probes,
//! mounts and security context, and the volumes that are not claims (the
//! projected service-account volume every pod carries), and the spare
//! room serde leaves in its lists. A Deployment's Running pod holds
//! 16.4 KB of heap whole, 7.2 KB thinned for the controller manager and
//! the simulated nodes, 6.4 KB for the scheduler
//! (`tests/pod_cache_size.rs` measures it).
//!
//! The spec is safe to thin because no controller writes a pod's spec
//! from its cache: they patch, or write the status subresource, which
//! takes nothing but `.status` from the body. The status is left whole
//! for that reason: a status written back from the cache must not lose
//! any of it. A component that never writes a status from its cache may
//! also drop the per-container statuses ([`strip_container_statuses`]).

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, Volume};

use super::transform::fit;

/// Drops the containers' runtime details and the volumes that are not
/// claims; keeps names, images, ports, resources and restart policies
/// (what scheduling, endpoints, quotas and autoscaling read).
pub fn strip_pod_runtime_details(pod: &mut Pod) {
    strip_pod_mounts_and_security(pod);
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    for container in all_containers(spec) {
        container.env = None;
        container.env_from = None;
        container.command = None;
        container.args = None;
        container.liveness_probe = None;
        container.readiness_probe = None;
        container.startup_probe = None;
        container.lifecycle = None;
    }
    if let Some(ephemeral) = spec.ephemeral_containers.as_mut() {
        for container in ephemeral {
            container.env = None;
            container.env_from = None;
            container.command = None;
            container.args = None;
        }
    }
}

/// Drops the volumes that are not claims, the containers' mounts,
/// security contexts, working directories and termination-message
/// settings; keeps what a simulated kubelet runs a container by (its
/// command, environment and probes).
pub fn strip_pod_mounts_and_security(pod: &mut Pod) {
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    for container in all_containers(spec) {
        container.working_dir = None;
        container.volume_mounts = None;
        container.volume_devices = None;
        container.security_context = None;
        container.termination_message_path = None;
        container.termination_message_policy = None;
    }
    if let Some(ephemeral) = spec.ephemeral_containers.as_mut() {
        for container in ephemeral {
            container.volume_mounts = None;
        }
    }
    if let Some(volumes) = spec.volumes.as_mut() {
        volumes.retain(is_claim);
        if volumes.is_empty() {
            spec.volumes = None;
        }
    }
    fit_pod_lists(pod);
}

/// Trims every list of a pod to its length (see [`fit`]).
fn fit_pod_lists(pod: &mut Pod) {
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers.shrink_to_fit();
        fit(&mut spec.init_containers);
        for container in all_containers(spec) {
            fit(&mut container.ports);
            fit(&mut container.env);
        }
        fit(&mut spec.tolerations);
        fit(&mut spec.volumes);
    }
    if let Some(status) = pod.status.as_mut() {
        fit(&mut status.conditions);
        fit(&mut status.container_statuses);
        fit(&mut status.init_container_statuses);
        fit(&mut status.pod_ips);
        fit(&mut status.host_ips);
    }
}

/// Drops the per-container statuses (for a component that reads a pod's
/// phase and conditions, never its containers' states).
pub fn strip_container_statuses(pod: &mut Pod) {
    if let Some(status) = pod.status.as_mut() {
        status.container_statuses = None;
        status.init_container_statuses = None;
        status.ephemeral_container_statuses = None;
    }
}

fn all_containers(spec: &mut PodSpec) -> impl Iterator<Item = &mut Container> {
    spec.containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
}

/// A volume a controller may care about: a claim, or a claim the pod
/// makes for itself.
fn is_claim(volume: &Volume) -> bool {
    volume.persistent_volume_claim.is_some() || volume.ephemeral.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "labels": {"app": "a"}},
            "spec": {
                "nodeName": "n1",
                "containers": [{
                    "name": "c", "image": "nginx:1.25",
                    "env": [{"name": "A", "value": "1"}], "command": ["sleep"],
                    "ports": [{"containerPort": 80, "name": "http"}],
                    "resources": {"requests": {"cpu": "100m"}},
                    "readinessProbe": {"httpGet": {"port": 80}},
                    "volumeMounts": [{"name": "token", "mountPath": "/var/run"}],
                    "terminationMessagePath": "/dev/termination-log",
                }],
                "initContainers": [{"name": "sidecar", "image": "envoy", "restartPolicy": "Always",
                                    "args": ["--x"]}],
                "volumes": [
                    {"name": "token", "projected": {"sources": []}},
                    {"name": "data", "persistentVolumeClaim": {"claimName": "www-p"}},
                ],
                "tolerations": [{"key": "k", "operator": "Exists"}],
            },
            "status": {"phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "containerStatuses": [{"name": "c", "image": "nginx:1.25", "imageID": "",
                                              "ready": true, "restartCount": 2}]},
        }))
        .unwrap()
    }

    #[test]
    fn runtime_details_and_non_claim_volumes_go_what_controllers_read_stays() {
        let mut pod = pod();
        strip_pod_runtime_details(&mut pod);
        let spec = pod.spec.as_ref().unwrap();
        let c = &spec.containers[0];
        assert!(c.env.is_none() && c.command.is_none() && c.readiness_probe.is_none());
        assert!(c.volume_mounts.is_none() && c.termination_message_path.is_none());
        assert_eq!(c.image.as_deref(), Some("nginx:1.25"));
        assert_eq!(c.ports.as_ref().unwrap()[0].name.as_deref(), Some("http"));
        assert!(c.resources.as_ref().unwrap().requests.is_some());
        let init = &spec.init_containers.as_ref().unwrap()[0];
        assert_eq!(init.restart_policy.as_deref(), Some("Always"));
        assert!(init.args.is_none());
        let volumes = spec.volumes.as_ref().unwrap();
        assert_eq!(volumes.len(), 1);
        assert_eq!(volumes[0].name, "data");
        assert_eq!(spec.node_name.as_deref(), Some("n1"));
        assert_eq!(spec.tolerations.as_ref().unwrap().len(), 1);
        let status = pod.status.as_ref().unwrap();
        assert_eq!(
            status.container_statuses.as_ref().unwrap()[0].restart_count,
            2
        );
    }

    #[test]
    fn a_simulated_kubelet_keeps_command_environment_and_probes() {
        let mut pod = pod();
        strip_pod_mounts_and_security(&mut pod);
        let spec = pod.spec.as_ref().unwrap();
        let c = &spec.containers[0];
        assert!(c.env.is_some() && c.command.is_some() && c.readiness_probe.is_some());
        assert!(c.volume_mounts.is_none() && c.termination_message_path.is_none());
        assert_eq!(spec.volumes.as_ref().unwrap().len(), 1);
        assert_eq!(spec.tolerations.as_ref().unwrap().capacity(), 1);
        let status = pod.status.as_ref().unwrap();
        assert_eq!(status.container_statuses.as_ref().unwrap().capacity(), 1);
        assert_eq!(status.conditions.as_ref().unwrap().capacity(), 1);
        assert_eq!(
            spec.init_containers.as_ref().unwrap()[0]
                .args
                .as_ref()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn container_statuses_go_phase_and_conditions_stay() {
        let mut pod = pod();
        strip_container_statuses(&mut pod);
        let status = pod.status.unwrap();
        assert!(status.container_statuses.is_none());
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(status.conditions.unwrap()[0].type_, "Ready");
    }
}
