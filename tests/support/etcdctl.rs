//! Running Debian's `etcdctl` (v3 API) against a member.

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// The result of one etcdctl run.
pub struct Run {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(output: Output) -> Run {
        Run {
            ok: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// `etcdctl --endpoints <endpoint> args...`, with `stdin` piped in if given.
pub fn etcdctl(endpoint: &str, args: &[&str], stdin: Option<&str>) -> Run {
    let mut child = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoint}"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("etcdctl is installed (make test installs Debian's etcd-client)");
    let mut pipe = child.stdin.take().expect("stdin piped");
    if let Some(input) = stdin {
        pipe.write_all(input.as_bytes()).expect("write etcdctl stdin");
    }
    drop(pipe);
    child.wait_with_output().expect("etcdctl runs").into()
}

/// Like [`etcdctl`], but the command must succeed; returns stdout.
pub fn etcdctl_ok(endpoint: &str, args: &[&str]) -> String {
    let run = etcdctl(endpoint, args, None);
    assert!(run.ok, "etcdctl {args:?} failed: {}", run.stderr);
    run.stdout
}

/// Runs etcdctl with `-w json` and parses the output.
pub fn etcdctl_json(endpoint: &str, args: &[&str]) -> serde_json::Value {
    let mut full = args.to_vec();
    full.extend(["-w", "json"]);
    let out = etcdctl_ok(endpoint, &full);
    serde_json::from_str(out.trim()).unwrap_or_else(|err| panic!("bad json {out:?}: {err}"))
}
