use clap::Parser;

use super::*;

#[test]
fn kube_defaults() {
    let settings = Settings::defaults();
    let election = settings.leader_election().unwrap();
    assert_eq!(election.lease_duration, Duration::from_secs(15));
    assert_eq!(election.renew_deadline, Duration::from_secs(10));
    assert_eq!(election.retry_period, Duration::from_secs(2));
    assert_eq!(election.name, "kube-controller-manager");
    assert_eq!(settings.kube_api_qps, 20.0);
    assert_eq!(settings.kube_api_burst, 30);
    assert_eq!(settings.concurrent_daemonset_syncs, 2);
    assert_eq!(settings.terminated_pod_gc_threshold, 12500);
    assert_eq!(
        settings.node_monitor_grace_period(),
        Duration::from_secs(40)
    );
}

#[test]
fn flags_win_and_bad_values_name_the_field() {
    let flags = Flags::parse_from([
        "capstan-controller-manager",
        "--controllers",
        "*,-cronjob",
        "--leader-elect-lease-duration",
        "1m30s",
    ]);
    let settings = Settings::load(&flags).unwrap();
    assert_eq!(settings.controllers, "*,-cronjob");
    assert_eq!(
        settings.leader_election().unwrap().lease_duration,
        Duration::from_secs(90)
    );
    let flags = Flags::parse_from([
        "capstan-controller-manager",
        "--leader-elect-renew-deadline",
        "20s",
    ]);
    let err = Settings::load(&flags).unwrap_err().to_string();
    assert!(err.contains("leader_elect_renew_deadline"), "{err}");
}
