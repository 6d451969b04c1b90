//! `capstan-apiserver` and `capstan` run as real child processes, and
//! kubectl driven against them with an isolated kubeconfig and cache.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::store::{http_get, StoreProcess};
use super::{binary, free_port};

/// Waits until `/readyz` answers 200 (the store is reachable and the
/// system namespaces exist), or panics with the log.
fn wait_ready(port: u16, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if http_get(port, "/readyz").is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "API server did not become ready; log:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

fn spawn_logged(command: &mut Command, log: &Path) -> Child {
    let file = std::fs::File::create(log).expect("create a log file");
    command
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .expect("start the server under test")
}

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `capstan-apiserver` in front of a `capstan-store`, each a process.
pub struct ApiCluster {
    // Fields drop in order: the API server, then the store, then the folder.
    api: Killed,
    pub store: StoreProcess,
    pub dir: tempfile::TempDir,
    pub port: u16,
    pub kubectl: Kubectl,
}

impl ApiCluster {
    pub fn start() -> ApiCluster {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let store = StoreProcess::start(&dir.path().join("store"), &[]);
        let port = free_port();
        let log = dir.path().join("apiserver.log");
        let mut command = Command::new(binary("capstan-apiserver"));
        command.args([
            "--etcd-servers",
            &store.url(),
            "--port",
            &port.to_string(),
            "--log-level",
            "warn",
        ]);
        let api = Killed(spawn_logged(&mut command, &log));
        wait_ready(port, &log);
        let kubectl = Kubectl::new(dir.path(), port);
        ApiCluster {
            api,
            store,
            dir,
            port,
            kubectl,
        }
    }

    pub fn pid(&self) -> u32 {
        self.api.0.id()
    }
}

/// The embedded default, `capstan`, in a temporary data folder.
pub struct Embedded {
    process: Killed,
    pub dir: tempfile::TempDir,
    pub port: u16,
    pub kubectl: Kubectl,
}

impl Embedded {
    pub fn start() -> Embedded {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let port = free_port();
        let data = dir.path().join("data");
        let log = dir.path().join("capstan.log");
        let mut command = Command::new(binary("capstan"));
        command
            .arg("--data-dir")
            .arg(&data)
            .args(["--port", &port.to_string()]);
        command.args([
            "--store-port",
            &free_port().to_string(),
            "--peer-port",
            &free_port().to_string(),
            "--log-level",
            "warn",
        ]);
        let process = Killed(spawn_logged(&mut command, &log));
        wait_ready(port, &log);
        let kubectl = Kubectl {
            kubeconfig: data.join("kubeconfig"),
            cache_dir: dir.path().join("kube-cache"),
        };
        Embedded {
            process,
            dir,
            port,
            kubectl,
        }
    }

    pub fn pid(&self) -> u32 {
        self.process.0.id()
    }
}

/// kubectl with its own kubeconfig and discovery cache.
pub struct Kubectl {
    pub kubeconfig: PathBuf,
    pub cache_dir: PathBuf,
}

impl Kubectl {
    pub fn new(dir: &Path, port: u16) -> Kubectl {
        let kubeconfig = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster: {{server: \"http://127.0.0.1:{port}\"}}\n\
contexts:\n- name: t\n  context: {{cluster: t, user: t, namespace: default}}\ncurrent-context: t\nusers:\n- name: t\n  user: {{}}\n"
        );
        std::fs::write(&kubeconfig, text).expect("write a kubeconfig");
        Kubectl {
            kubeconfig,
            cache_dir: dir.join("kube-cache"),
        }
    }

    pub fn command(&self, args: &[&str]) -> Command {
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
