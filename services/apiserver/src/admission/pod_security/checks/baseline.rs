//! The baseline level's checks on host access and privileges: host
//! namespaces, host ports, hostPath volumes, privileged containers,
//! added capabilities, /proc mounts, sysctls and Windows host processes.
//! (The security profiles' checks are in `profiles.rs`.)

use std::collections::BTreeSet;

use serde_json::Value;

use super::super::levels::Level;
use super::super::pod::{containers_named, join_quoted, name, plural, security, PodView};
use super::check::{Check, Violation};

const fn baseline(
    id: &'static str,
    overlap: bool,
    run: fn(&PodView) -> Option<Violation>,
) -> Check {
    Check {
        id,
        level: Level::Baseline,
        overlap,
        since: 0,
        run,
    }
}

pub const HOST_NAMESPACES: Check = baseline("hostNamespaces", false, host_namespaces);
pub const HOST_PORTS: Check = baseline("hostPorts", false, host_ports);
pub const PRIVILEGED: Check = baseline("privileged", false, privileged);
pub const PROC_MOUNT: Check = baseline("procMount", false, proc_mount);
pub const SYSCTLS: Check = baseline("sysctls", false, sysctls);
pub const WINDOWS_HOST_PROCESS: Check = baseline("windowsHostProcess", false, host_process);
pub const CAPABILITIES: Check = baseline("capabilities_baseline", true, capabilities);
pub const HOST_PATH_VOLUMES: Check = baseline("hostPathVolumes", true, host_path_volumes);

/// The capabilities container runtimes grant by default.
const DEFAULT_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// Namespaced sysctls that cannot affect other pods (the newest list).
const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

fn is_true(value: &Value) -> bool {
    value.as_bool() == Some(true)
}

fn strings(value: &Value) -> impl Iterator<Item = &str> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

fn host_namespaces(pod: &PodView) -> Option<Violation> {
    let shared: Vec<String> = ["hostNetwork", "hostPID", "hostIPC"]
        .into_iter()
        .filter(|field| is_true(&pod.spec[*field]))
        .map(|field| format!("{field}=true"))
        .collect();
    if shared.is_empty() {
        return None;
    }
    Violation::new("host namespaces", shared.join(", "))
}

fn host_ports(pod: &PodView) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut ports = BTreeSet::new();
    for container in pod.containers() {
        let used: Vec<i64> = container["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["hostPort"].as_i64())
            .filter(|port| *port != 0)
            .collect();
        if !used.is_empty() {
            bad.push(name(container));
            ports.extend(used.iter().map(i64::to_string));
        }
    }
    if bad.is_empty() {
        return None;
    }
    let ports: Vec<String> = ports.into_iter().collect();
    Violation::new(
        "hostPort",
        format!(
            "{} {} {} {}",
            containers_named(&bad),
            plural("uses", "use", bad.len()),
            plural("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        ),
    )
}

fn privileged(pod: &PodView) -> Option<Violation> {
    let bad = pod.containers_where(|s| is_true(&s["privileged"]));
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "privileged",
        format!(
            "{} must not set securityContext.privileged=true",
            containers_named(&bad)
        ),
    )
}

fn proc_mount(pod: &PodView) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut kinds = BTreeSet::new();
    for container in pod.containers() {
        match security(container)["procMount"].as_str() {
            None | Some("Default") => {}
            Some(kind) => {
                bad.push(name(container));
                kinds.insert(kind.to_string());
            }
        }
    }
    if bad.is_empty() {
        return None;
    }
    let kinds: Vec<String> = kinds.into_iter().collect();
    Violation::new(
        "procMount",
        format!(
            "{} must not set securityContext.procMount to {}",
            containers_named(&bad),
            join_quoted(&kinds)
        ),
    )
}

fn sysctls(pod: &PodView) -> Option<Violation> {
    let bad: Vec<&str> = pod.security()["sysctls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["name"].as_str())
        .filter(|name| !SAFE_SYSCTLS.contains(name))
        .collect();
    if bad.is_empty() {
        return None;
    }
    Violation::new("forbidden sysctls", bad.join(", "))
}

fn host_process(pod: &PodView) -> Option<Violation> {
    let host = |sc: &Value| is_true(&sc["windowsOptions"]["hostProcess"]);
    let mut setters = Vec::new();
    if host(pod.security()) {
        setters.push("pod".to_string());
    }
    let bad = pod.containers_where(host);
    if !bad.is_empty() {
        setters.push(containers_named(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    Violation::new(
        "hostProcess",
        format!(
            "{} must not set securityContext.windowsOptions.hostProcess=true",
            setters.join(" and ")
        ),
    )
}

fn capabilities(pod: &PodView) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut added = BTreeSet::new();
    for container in pod.containers() {
        let extra: Vec<&str> = strings(&security(container)["capabilities"]["add"])
            .filter(|cap| !DEFAULT_CAPABILITIES.contains(cap))
            .collect();
        if !extra.is_empty() {
            bad.push(name(container));
            added.extend(extra);
        }
    }
    if bad.is_empty() {
        return None;
    }
    let added: Vec<&str> = added.into_iter().collect();
    Violation::new(
        "non-default capabilities",
        format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_named(&bad),
            join_quoted(&added)
        ),
    )
}

fn host_path_volumes(pod: &PodView) -> Option<Violation> {
    let bad: Vec<String> = pod.spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v.get("hostPath").is_some_and(|h| !h.is_null()))
        .map(name)
        .collect();
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "hostPath volumes",
        format!(
            "{} {}",
            plural("volume", "volumes", bad.len()),
            join_quoted(&bad)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(check: &Check, spec: Value) -> Option<(String, String)> {
        let pod = json!({"metadata": {}, "spec": spec});
        (check.run)(&PodView::of_pod(&pod)).map(|v| (v.reason, v.detail))
    }

    fn detail(check: &Check, spec: Value) -> String {
        run(check, spec).expect("a violation").1
    }

    #[test]
    fn host_namespaces_and_ports() {
        assert_eq!(run(&HOST_NAMESPACES, json!({"hostNetwork": false})), None);
        let both = json!({"hostPID": true, "hostNetwork": true});
        assert_eq!(
            detail(&HOST_NAMESPACES, both),
            "hostNetwork=true, hostPID=true"
        );
        let ports = json!({"containers": [
            {"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81, "hostPort": 0}]},
            {"name": "b", "ports": [{"hostPort": 10000}]}]});
        assert_eq!(
            detail(&HOST_PORTS, ports),
            "containers \"a\", \"b\" use hostPorts 10000, 8080"
        );
        let one = json!({"containers": [{"name": "a", "ports": [{"hostPort": 80}]}]});
        assert_eq!(detail(&HOST_PORTS, one), "container \"a\" uses hostPort 80");
        assert_eq!(
            run(
                &HOST_PORTS,
                json!({"containers": [{"name": "a", "ports": [{"containerPort": 80}]}]})
            ),
            None
        );
    }

    #[test]
    fn privileged_proc_mount_and_host_process() {
        let spec = json!({"initContainers": [{"name": "i", "securityContext": {"privileged": true}}],
            "containers": [{"name": "c", "securityContext": {"privileged": false, "procMount": "Unmasked"}}]});
        assert_eq!(
            detail(&PRIVILEGED, spec.clone()),
            "container \"i\" must not set securityContext.privileged=true"
        );
        assert_eq!(
            detail(&PROC_MOUNT, spec),
            "container \"c\" must not set securityContext.procMount to \"Unmasked\""
        );
        let default =
            json!({"containers": [{"name": "c", "securityContext": {"procMount": "Default"}}]});
        assert_eq!(run(&PROC_MOUNT, default), None);
        let windows = json!({"securityContext": {"windowsOptions": {"hostProcess": true}},
            "containers": [{"name": "c", "securityContext": {"windowsOptions": {"hostProcess": true}}}]});
        assert_eq!(
            detail(&WINDOWS_HOST_PROCESS, windows),
            "pod and container \"c\" must not set securityContext.windowsOptions.hostProcess=true"
        );
    }

    #[test]
    fn capabilities_beyond_the_default_set_and_host_paths() {
        let spec = json!({"containers": [
            {"name": "a", "securityContext": {"capabilities": {"add": ["NET_ADMIN", "CHOWN", "SYS_ADMIN"]}}},
            {"name": "b", "securityContext": {"capabilities": {"add": ["KILL"]}}}]});
        assert_eq!(detail(&CAPABILITIES, spec),
            "container \"a\" must not include \"NET_ADMIN\", \"SYS_ADMIN\" in securityContext.capabilities.add");
        let volumes = json!({"volumes": [{"name": "h", "hostPath": {"path": "/"}}, {"name": "e", "emptyDir": {}}]});
        assert_eq!(
            run(&HOST_PATH_VOLUMES, volumes),
            Some(("hostPath volumes".into(), "volume \"h\"".into()))
        );
    }

    #[test]
    fn only_safe_sysctls() {
        let spec = json!({"securityContext": {"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "0"},
            {"name": "kernel.msgmax", "value": "1"}, {"name": "net.core.somaxconn", "value": "1"}]}});
        assert_eq!(
            run(&SYSCTLS, spec),
            Some((
                "forbidden sysctls".into(),
                "kernel.msgmax, net.core.somaxconn".into()
            ))
        );
    }
}
