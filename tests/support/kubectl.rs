//! kubectl (found on PATH, as scripts/install-deps.sh finds it) driven
//! against an API server with an isolated kubeconfig and discovery cache.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use super::tls::{self, Identity};
use super::watchdog;

/// kubectl with its own kubeconfig and discovery cache.
pub struct Kubectl {
    pub kubeconfig: PathBuf,
    pub cache_dir: PathBuf,
}

impl Kubectl {
    /// kubectl as the admin of the API server on `port` (over HTTPS when
    /// the port is registered in [`super::tls`]).
    pub fn new(dir: &Path, port: u16) -> Kubectl {
        Kubectl::as_identity(dir, port, &Identity::Admin, "kubeconfig")
    }

    /// kubectl as `identity`, its kubeconfig at `dir/<file>`.
    pub fn as_identity(dir: &Path, port: u16, identity: &Identity, file: &str) -> Kubectl {
        let kubeconfig = dir.join(file);
        let text = match tls::pki_of(port) {
            Some(pki) => tls::kubeconfig(port, &pki, identity),
            None => format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster: {{server: \"http://127.0.0.1:{port}\"}}\n\
contexts:\n- name: t\n  context: {{cluster: t, user: t, namespace: default}}\ncurrent-context: t\nusers:\n- name: t\n  user: {{}}\n"
            ),
        };
        std::fs::write(&kubeconfig, text).expect("write a kubeconfig");
        Kubectl {
            kubeconfig,
            cache_dir: dir.join("kube-cache"),
        }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        watchdog::waiting_for(format!("kubectl {args:?}"));
        let mut command = Command::new("kubectl");
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache_dir)
            .args(args);
        command
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run kubectl")
    }

    /// Runs kubectl, feeding `stdin`.
    pub fn run_with_input(&self, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl");
        child
            .stdin
            .take()
            .expect("piped")
            .write_all(stdin.as_bytes())
            .expect("write stdin");
        child.wait_with_output().expect("wait for kubectl")
    }

    /// stdout of a command that must succeed.
    pub fn ok(&self, args: &[&str]) -> String {
        checked(args, self.run(args))
    }

    /// `kubectl apply -f -` (or any `-f -` command) with `yaml`.
    pub fn ok_with_input(&self, args: &[&str], yaml: &str) -> String {
        checked(args, self.run_with_input(args, yaml))
    }

    /// A command left running (such as `get -w`), its output read with
    /// deadlines; stopped when the handle is dropped.
    pub fn spawn(&self, args: &[&str]) -> Running {
        let mut child = self
            .command(args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start kubectl {args:?}: {e}"));
        let lines = Lines::of(child.stdout.take().expect("a piped stdout"));
        Running { child, lines }
    }

    /// Waits until the controller manager has made the `default`
    /// ServiceAccount of `default`, as kube's e2e framework waits before
    /// its first pod (admission refuses pods whose account is missing).
    pub fn wait_for_default_account(&self) {
        let args = ["get", "serviceaccount", "default", "-n", "default"];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !self.run(&args).status.success() {
            assert!(
                std::time::Instant::now() < deadline,
                "no default ServiceAccount within 60 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// The Events about objects named `name`, one `reason: message` a line.
    pub fn events_of(&self, name: &str) -> String {
        let selector = format!("involvedObject.name={name}");
        let lines = "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}";
        self.ok(&["get", "events", "--field-selector", &selector, "-o", lines])
    }

    /// Waits until exactly `count` nodes are Ready.
    pub fn wait_ready_nodes(&self, count: usize, timeout: std::time::Duration) {
        let ready = "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}";
        crate::poll::wait_for(timeout, &format!("{count} Ready nodes"), || {
            let statuses = self.ok(&["get", "nodes", "-o", ready]);
            (statuses.lines().filter(|l| *l == "True").count() == count).then_some(())
        });
    }

    /// stderr of a command that must fail.
    pub fn fails(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            !output.status.success(),
            "kubectl {args:?} should have failed; stdout:\n{}",
            String::from_utf8_lossy(&output.stdout)
        );
        String::from_utf8_lossy(&output.stderr).to_string()
    }
}

fn checked(args: &[&str], output: Output) -> String {
    assert!(
        output.status.success(),
        "kubectl {args:?} failed:\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).to_string()
}

/// A running kubectl and the lines it prints; killed when dropped.
pub struct Running {
    child: Child,
    pub lines: Lines,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The lines a child process prints, read on a thread so that every read
/// has a deadline (a missed event fails the test instead of hanging it).
pub struct Lines {
    receiver: std::sync::mpsc::Receiver<std::io::Result<String>>,
}

impl Lines {
    pub fn of(output: impl std::io::Read + Send + 'static) -> Lines {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(output).lines() {
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        Lines { receiver }
    }

    /// The next line within `timeout`; `what` names it in the failure.
    pub fn next(&self, timeout: std::time::Duration, what: &str) -> String {
        watchdog::waiting_for(what);
        match self.receiver.recv_timeout(timeout) {
            Ok(Ok(line)) => line,
            Ok(Err(e)) => panic!("reading the output while waiting for {what}: {e}"),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                panic!("no output within {timeout:?} while waiting for {what}")
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                panic!("the output ended while waiting for {what}")
            }
        }
    }
}

/// The header and the row of `name` of `kubectl get`, words single-spaced.
pub fn table(kubectl: &Kubectl, args: &[&str], name: &str) -> (String, String) {
    let out = kubectl.ok(args);
    let squeeze = |l: &str| l.split_whitespace().collect::<Vec<_>>().join(" ");
    let header = squeeze(out.lines().next().unwrap_or(""));
    let row = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .map(squeeze)
        .unwrap_or_else(|| panic!("no {name} in\n{out}"));
    (header, row)
}

/// Drops the AGE cell (whatever the clock says) from a squeezed row.
pub fn without_age(row: &str, age_index: usize) -> String {
    let mut words: Vec<&str> = row.split(' ').collect();
    words.remove(age_index);
    words.join(" ")
}

/// `-o name` lines without `kube-root-ca.crt`, which the root CA publisher
/// keeps in every namespace (and makes again after `delete cm --all`).
pub fn without_root_ca(names: &str) -> String {
    names
        .lines()
        .filter(|line| !line.contains("kube-root-ca.crt"))
        .collect::<Vec<_>>()
        .join("\n")
}
