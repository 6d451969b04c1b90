//! Batch workloads on `capstan` with the scheduler and simulated nodes,
//! driven with kubectl as a person would: a Job runs to completion and
//! says so (condition, events, released pods); an Indexed Job whose
//! index 1 fails (its pod deleted, backoffLimitPerIndex 0) ends Failed
//! with the other indexes completed; a Job with ttlSecondsAfterFinished
//! is deleted after it finished; deleting a Job takes its pods; a
//! CronJob starts a Job on schedule and, with Forbid, no second one while
//! the first runs.

use std::time::Duration;

use capstan_tests::apiserver::{Embedded, Kubectl};
use capstan_tests::component::Component;
use capstan_tests::free_port;
use capstan_tests::poll::wait_for;
use capstan_tests::sim_nodes::SimNodes;

const WAIT: Duration = Duration::from_secs(90);

/// `capstan`, one `capstan-scheduler` and one `capstan-nodes` with two
/// nodes; the helpers are killed when dropped.
struct Workloads {
    // Fields drop in order: the helpers go before the API server.
    _scheduler: Component,
    _nodes: SimNodes,
    capstan: Embedded,
}

impl Workloads {
    fn start() -> Workloads {
        let capstan = Embedded::start();
        let (dir, kubectl) = (capstan.dir.path(), &capstan.kubectl);
        let port = free_port().to_string();
        let scheduler =
            Component::start(dir, kubectl, "capstan-scheduler", &["--secure-port", &port]);
        let node_args = ["--nodes", "2", "--pod-run-duration", "1s"];
        let nodes = SimNodes::start(dir, kubectl, &node_args);
        let workloads = Workloads {
            capstan,
            _scheduler: scheduler,
            _nodes: nodes,
        };
        workloads.kubectl().wait_ready_nodes(2, WAIT);
        workloads
    }

    fn kubectl(&self) -> &Kubectl {
        &self.capstan.kubectl
    }
}

fn jsonpath(kubectl: &Kubectl, object: &str, path: &str) -> String {
    let path = format!("jsonpath={path}");
    kubectl.ok(&["get", object, "-o", &path])
}

fn wait_condition(kubectl: &Kubectl, job: &str, condition: &str) {
    let path = format!("{{.status.conditions[?(@.type==\"{condition}\")].status}}");
    let what = format!("{job} {condition}");
    wait_for(WAIT, &what, || {
        (jsonpath(kubectl, job, &path) == "True").then_some(())
    });
}

#[test]
fn jobs_complete_fail_an_index_and_go_with_their_pods() {
    let cluster = Workloads::start();
    let kubectl = cluster.kubectl();

    kubectl.ok(&[
        "create",
        "job",
        "hello",
        "--image=busybox",
        "--",
        "echo",
        "hi",
    ]);
    wait_condition(kubectl, "job/hello", "Complete");
    let row = kubectl.ok(&["get", "job", "hello", "--no-headers"]);
    assert!(row.contains("Complete") && row.contains("1/1"), "{row}");
    assert_eq!(
        jsonpath(kubectl, "job/hello", "{.status.succeeded}/{.status.failed}"),
        "1/"
    );
    let events = kubectl.events_of("hello");
    assert!(
        events.contains("SuccessfulCreate: Created pod: hello-")
            && events.contains("Completed: Job completed"),
        "{events}"
    );
    // The finished pod was counted and let go: no tracking finalizer.
    let finalizers = kubectl.ok(&[
        "get",
        "pods",
        "-l",
        "job-name=hello",
        "-o",
        "jsonpath={.items[*].metadata.finalizers}{.items[*].status.phase}",
    ]);
    assert_eq!(finalizers, "Succeeded");

    // An Indexed Job: three indexes, each allowed no failure; index 1's
    // pod is deleted while it runs, which counts as its failure.
    kubectl.ok_with_input(&["apply", "-f", "-"], INDEXED);
    let index_one = "job-name=indexed,batch.kubernetes.io/job-completion-index=1";
    wait_for(WAIT, "index 1's pod", || {
        let name = kubectl.ok(&["get", "pods", "-l", index_one, "-o", "name"]);
        (!name.trim().is_empty()).then_some(())
    });
    kubectl.ok(&["delete", "pods", "-l", index_one, "--wait=false"]);
    wait_condition(kubectl, "job/indexed", "Failed");
    assert_eq!(
        jsonpath(
            kubectl,
            "job/indexed",
            "{.status.completedIndexes}/{.status.failedIndexes}/{.status.conditions[?(@.type==\"Failed\")].reason}"
        ),
        "0,2/1/FailedIndexes"
    );
    let env = kubectl.ok(&[
        "get",
        "pods",
        "-l",
        "job-name=indexed,batch.kubernetes.io/job-completion-index=2",
        "-o",
        "jsonpath={.items[0].spec.containers[0].env[?(@.name==\"JOB_COMPLETION_INDEX\")].value} {.items[0].spec.hostname}",
    ]);
    assert_eq!(env, "2 indexed-2");

    // A Job with ttlSecondsAfterFinished goes, with its pod, once it
    // finished and its TTL ran out.
    kubectl.ok_with_input(&["apply", "-f", "-"], SHORT_LIVED);
    wait_for(WAIT, "the short-lived Job cleaned up", || {
        let left = kubectl.ok(&[
            "get",
            "jobs,pods",
            "-l",
            "job-name=short-lived",
            "-o",
            "name",
        ]);
        let job = kubectl.run(&["get", "job", "short-lived"]);
        (left.trim().is_empty() && !job.status.success()).then_some(())
    });

    // Deleting a Job takes its pods (the garbage collector; no finalizer
    // holds them).
    kubectl.ok(&["delete", "job", "hello", "indexed"]);
    wait_for(WAIT, "the jobs' pods gone", || {
        let left = kubectl.ok(&["get", "pods", "-l", "job-name", "-o", "name"]);
        left.trim().is_empty().then_some(())
    });
}

const INDEXED: &str = r#"
apiVersion: batch/v1
kind: Job
metadata: {name: indexed}
spec:
  completions: 3
  parallelism: 3
  completionMode: Indexed
  backoffLimitPerIndex: 0
  template:
    metadata:
      annotations: {nodes.capstan.dev/run-duration: 30s}
    spec:
      restartPolicy: Never
      containers: [{name: work, image: busybox}]
"#;

const SHORT_LIVED: &str = r#"
apiVersion: batch/v1
kind: Job
metadata: {name: short-lived}
spec:
  ttlSecondsAfterFinished: 2
  template:
    spec:
      restartPolicy: Never
      containers: [{name: work, image: busybox}]
"#;

#[test]
fn a_cronjob_starts_a_job_on_schedule_and_honours_forbid() {
    let cluster = Workloads::start();
    let kubectl = cluster.kubectl();
    kubectl.ok_with_input(&["apply", "-f", "-"], EVERY_MINUTE);
    // Within a minute (and a little), a Job named for its start minute.
    let minute_wait = Duration::from_secs(150);
    let first = wait_for(minute_wait, "the CronJob's first Job", || {
        let names = kubectl.ok(&["get", "jobs", "-o", "name"]);
        names.lines().next().map(str::to_string)
    });
    assert!(first.starts_with("job.batch/every-minute-"), "{first}");
    let active = jsonpath(kubectl, "cronjob/every-minute", "{.status.active[0].name}");
    assert_eq!(format!("job.batch/{active}"), first);
    // The next minute comes while the first Job still runs: Forbid
    // starts nothing and says why.
    wait_for(minute_wait, "JobAlreadyActive", || {
        let events = kubectl.events_of("every-minute");
        events.contains("JobAlreadyActive: Not starting job because prior execution is running and concurrency policy is Forbid").then_some(())
    });
    let jobs = kubectl.ok(&["get", "jobs", "-o", "name"]);
    assert_eq!(jobs.trim(), first, "one Job only");
    let events = kubectl.events_of("every-minute");
    assert!(
        events.contains("SuccessfulCreate: Created job every-minute-"),
        "{events}"
    );
    let row = kubectl.ok(&["get", "cronjob", "every-minute", "--no-headers"]);
    assert!(row.contains("* * * * *") && row.contains(" 1 "), "{row}");
}

const EVERY_MINUTE: &str = r#"
apiVersion: batch/v1
kind: CronJob
metadata: {name: every-minute}
spec:
  schedule: "* * * * *"
  concurrencyPolicy: Forbid
  jobTemplate:
    spec:
      template:
        metadata:
          annotations: {nodes.capstan.dev/run-duration: 10m}
        spec:
          restartPolicy: Never
          containers: [{name: work, image: busybox}]
"#;
