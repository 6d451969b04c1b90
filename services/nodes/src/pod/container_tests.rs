use chrono::TimeDelta;

use super::*;

fn at(seconds: i64) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2025-03-01T10:00:00Z")
        .unwrap()
        .to_utc()
        + TimeDelta::seconds(seconds)
}

fn spec() -> Container {
    Container {
        name: "app".into(),
        image: Some("nginx:1.27".into()),
        ..Container::default()
    }
}

const WHO: Identity = Identity {
    pod_uid: "uid",
    pod_name: "web",
    namespace: "ns",
};

fn script(run_for: Option<u64>, exit_code: i32, restart: Restart) -> Script {
    Script {
        start_at: at(0),
        run_for: run_for.map(Duration::from_secs),
        exit_code,
        restart,
        startup_delay: Duration::ZERO,
        ready_delay: Some(Duration::ZERO),
        waiting_reason: "ContainerCreating",
    }
}

#[test]
fn a_container_waits_for_its_start() {
    let mut s = script(None, 0, Restart::Always);
    s.start_at = at(5);
    let (status, wake) = advance(&spec(), None, &s, &WHO, at(1));
    assert_eq!(wake, Some(at(5)));
    let waiting = status.state.unwrap().waiting.unwrap();
    assert_eq!(waiting.reason.as_deref(), Some("ContainerCreating"));
    assert_eq!(status.image, "docker.io/library/nginx:1.27");
}

#[test]
fn each_run_has_its_own_container_id() {
    let s = script(Some(10), 0, Restart::Always);
    let (first, _) = advance(&spec(), None, &s, &WHO, at(0));
    let (second, _) = advance(&spec(), Some(&first), &s, &WHO, at(10));
    assert_eq!(second.restart_count, 1);
    assert_ne!(first.container_id, second.container_id);
    let last = second.last_state.unwrap().terminated.unwrap();
    assert_eq!(last.container_id, first.container_id);
    assert_eq!(last.reason.as_deref(), Some("Completed"));
}

#[test]
fn the_back_off_doubles_to_five_minutes() {
    let secs: Vec<u64> = (1..=8).map(|n| backoff(n).as_secs()).collect();
    assert_eq!(secs, [0, 10, 20, 40, 80, 160, 300, 300]);
    assert_eq!(backoff(i32::MAX).as_secs(), 300);
}

#[test]
fn a_startup_probe_delays_started_and_ready() {
    let mut s = script(None, 0, Restart::Always);
    s.startup_delay = Duration::from_secs(4);
    s.ready_delay = Some(Duration::from_secs(1));
    let (status, wake) = advance(&spec(), None, &s, &WHO, at(2));
    assert_eq!(
        (status.started, status.ready, wake),
        (Some(false), false, Some(at(4)))
    );
    let (status, wake) = advance(&spec(), Some(&status), &s, &WHO, at(4));
    assert_eq!(
        (status.started, status.ready, wake),
        (Some(true), true, None)
    );
}

#[test]
fn images_are_named_as_a_runtime_names_them() {
    assert_eq!(normalized_image("nginx"), "docker.io/library/nginx:latest");
    assert_eq!(
        normalized_image("bitnami/redis:7"),
        "docker.io/bitnami/redis:7"
    );
    assert_eq!(
        normalized_image("registry.k8s.io/pause:3.10"),
        "registry.k8s.io/pause:3.10"
    );
    assert_eq!(
        normalized_image("localhost:5000/app"),
        "localhost:5000/app:latest"
    );
    assert_eq!(
        normalized_image("nginx@sha256:abc"),
        "docker.io/library/nginx@sha256:abc"
    );
    let id = image_id("docker.io/library/nginx:1.27");
    assert!(id.starts_with("docker.io/library/nginx@sha256:"), "{id}");
    assert_eq!(id.len(), "docker.io/library/nginx@sha256:".len() + 64);
}
