use super::*;

fn field_error(text: &str) -> FieldError {
    match parse(text) {
        Err(ParseError::Field(e)) => e,
        other => panic!("expected a field error, got {other:?}"),
    }
}

const HEADER: &str =
    "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";

#[test]
fn an_empty_file_gets_kube_defaults() {
    let config = parse(HEADER).unwrap();
    assert_eq!(config.parallelism, 16);
    assert_eq!(config.percentage_of_nodes_to_score, 0);
    assert_eq!(config.pod_initial_backoff, Duration::from_secs(1));
    assert_eq!(config.pod_max_backoff, Duration::from_secs(10));
    assert_eq!(config.qps, 50.0);
    assert_eq!(config.burst, 100);
    assert!(config.leader_election.leader_elect);
    assert_eq!(config.leader_election.resource_name, "kube-scheduler");
    assert_eq!(config.leader_election.resource_namespace, "kube-system");
    assert_eq!(
        config.leader_election.lease_duration,
        Duration::from_secs(15)
    );
    assert_eq!(config.profiles.len(), 1);
    assert_eq!(config.profiles[0].scheduler_name, "default-scheduler");
    let names: Vec<_> = config.profiles[0]
        .multi_point
        .enabled
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert!(names.contains(&"TaintToleration") && names.contains(&"DefaultBinder"));
}

#[test]
fn profiles_merge_plugins_and_keep_args() {
    let text = format!(
        "{HEADER}percentageOfNodesToScore: 30\nprofiles:\n- schedulerName: a\n  plugins:\n    multiPoint:\n      disabled:\n      - name: ImageLocality\n    score:\n      enabled:\n      - name: NodeAffinity\n        weight: 7\n  pluginConfig:\n  - name: InterPodAffinity\n    args:\n      hardPodAffinityWeight: 5\n- schedulerName: b\n"
    );
    let config = parse(&text).unwrap();
    assert_eq!(config.percentage_of_nodes_to_score, 30);
    let a = &config.profiles[0];
    assert!(!a
        .multi_point
        .enabled
        .iter()
        .any(|p| p.name == "ImageLocality"));
    assert_eq!(a.points[&ExtensionPoint::Score].enabled[0].weight, Some(7));
    assert_eq!(
        a.plugin_args["InterPodAffinity"].1["hardPodAffinityWeight"],
        5
    );
    assert_eq!(config.profiles[1].scheduler_name, "b");
}

#[test]
fn malformed_files_name_the_field() {
    let cases = [
        (
            format!("{HEADER}percentageOfNodesToScore: 101\n"),
            "percentageOfNodesToScore",
        ),
        (format!("{HEADER}parallelism: 0\n"), "parallelism"),
        (
            format!("{HEADER}podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 2\n"),
            "podMaxBackoffSeconds",
        ),
        (
            format!("{HEADER}profiles:\n- schedulerName: x\n- schedulerName: x\n"),
            "profiles[1].schedulerName",
        ),
        (
            format!("{HEADER}profiles:\n- {{}}\n- schedulerName: y\n"),
            "profiles[0].schedulerName",
        ),
        (
            format!("{HEADER}leaderElection:\n  leaseDuration: 5s\n  renewDeadline: 10s\n"),
            "leaderElection.leaseDuration",
        ),
        (
            format!("{HEADER}leaderElection:\n  resourceLock: endpoints\n"),
            "leaderElection.resourceLock",
        ),
        (
            "kind: KubeSchedulerConfiguration\n".to_string(),
            "apiVersion",
        ),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1beta1\nkind: KubeSchedulerConfiguration\n"
                .to_string(),
            "apiVersion",
        ),
    ];
    for (text, field) in cases {
        assert_eq!(field_error(&text).field, field, "{text}");
    }
}

#[test]
fn unknown_fields_are_refused_with_their_name() {
    let text = format!("{HEADER}percentageOfNodesToScor: 10\n");
    match parse(&text) {
        Err(ParseError::Decode(message)) => {
            assert!(message.contains("percentageOfNodesToScor"), "{message}")
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
}

#[test]
fn load_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scheduler.yaml");
    std::fs::write(&path, format!("{HEADER}parallelism: -1\n")).unwrap();
    let message = load(&path).unwrap_err().to_string();
    assert!(
        message.starts_with(&path.display().to_string()),
        "{message}"
    );
    assert!(
        message.contains("parallelism: Invalid value: -1"),
        "{message}"
    );
}
