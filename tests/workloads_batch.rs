//! Batch workloads on `capstan` with the scheduler and simulated nodes,
//! driven with kubectl as a person would: a Job runs to completion and
//! says so (condition, events, released pods); an Indexed Job whose
//! index 1 fails (its pod deleted, backoffLimitPerIndex 0) ends Failed
//! with the other indexes completed; a Job with ttlSecondsAfterFinished
//! is deleted after it finished; deleting a Job takes its pods; a
//! CronJob starts a Job on schedule and, with Forbid, no second one while
//! the first runs.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use capstan_tests::apiserver::{Embedded, Kubectl};
use capstan_tests::poll::wait_for;
use capstan_tests::{binary, free_port, watchdog};

const WAIT: Duration = Duration::from_secs(90);

/// `capstan`, one `capstan-scheduler` and one `capstan-nodes` with two
/// nodes; the helpers are killed when dropped.
struct Workloads {
    capstan: Embedded,
    helpers: Vec<Child>,
    _watchdog: watchdog::Watchdog,
}

impl Workloads {
    fn start() -> Workloads {
        let capstan = Embedded::start();
        let kubeconfig = capstan.kubectl.kubeconfig.clone();
        let dir = capstan.dir.path().to_path_buf();
        let scheduler = spawn(
            &dir,
            "capstan-scheduler",
            &[
                "--kubeconfig",
                kubeconfig.to_str().unwrap(),
                "--secure-port",
                &free_port().to_string(),
            ],
        );
        let nodes = spawn(
            &dir,
            "capstan-nodes",
            &[
                "--kubeconfig",
                kubeconfig.to_str().unwrap(),
                "--nodes",
                "2",
                "--kubelet-port",
                "0",
                "--healthz-port",
                &free_port().to_string(),
                "--pod-run-duration",
                "1s",
            ],
        );
        let workloads = Workloads {
            capstan,
            helpers: vec![scheduler, nodes],
            _watchdog: watchdog::arm(),
        };
        wait_for(WAIT, "two Ready nodes", || {
            let ready = workloads.kubectl().ok(&[
                "get",
                "nodes",
                "-o",
                "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}",
            ]);
            (ready.lines().filter(|l| *l == "True").count() == 2).then_some(())
        });
        workloads
    }

    fn kubectl(&self) -> &Kubectl {
        &self.capstan.kubectl
    }
}

impl Drop for Workloads {
    fn drop(&mut self) {
        for child in &mut self.helpers {
            let _ = child.kill();
            let _ = child.wait();
            watchdog::untrack(child.id());
        }
    }
}

fn spawn(dir: &Path, name: &str, args: &[&str]) -> Child {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).expect("create a log");
    let child = Command::new(binary(name))
        .args(args)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("start {name}: {e}"));
    watchdog::track(child.id());
    child
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

fn events_of(kubectl: &Kubectl, name: &str) -> String {
    let selector = format!("involvedObject.name={name}");
    kubectl.ok(&[
        "get",
        "events",
        "--field-selector",
        &selector,
        "-o",
        "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}",
    ])
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
    let events = events_of(kubectl, "hello");
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
        let events = events_of(kubectl, "every-minute");
        events.contains("JobAlreadyActive: Not starting job because prior execution is running and concurrency policy is Forbid").then_some(())
    });
    let jobs = kubectl.ok(&["get", "jobs", "-o", "name"]);
    assert_eq!(jobs.trim(), first, "one Job only");
    let events = events_of(kubectl, "every-minute");
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
