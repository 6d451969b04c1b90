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
    super::watchdog::waiting_for(format!("etcdctl {args:?}"));
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
        pipe.write_all(input.as_bytes())
            .expect("write etcdctl stdin");
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

/// Like [`etcdctl`], but the command must fail; returns stderr.
pub fn etcdctl_err(endpoint: &str, args: &[&str]) -> String {
    let run = etcdctl(endpoint, args, None);
    assert!(
        !run.ok,
        "etcdctl {args:?} should fail but printed: {}",
        run.stdout
    );
    run.stderr
}

/// Decodes a base64 string field of etcdctl's JSON output (keys, values).
pub fn json_text(field: &serde_json::Value) -> String {
    let text = field
        .as_str()
        .unwrap_or_else(|| panic!("not a base64 string: {field}"));
    let mut bits = 0u32;
    let mut count = 0;
    let mut bytes = Vec::new();
    for c in text.bytes().take_while(|&c| c != b'=') {
        let six = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("bad base64 {text:?}"),
        };
        bits = (bits << 6) | u32::from(six);
        count += 6;
        if count >= 8 {
            count -= 8;
            bytes.push((bits >> count) as u8);
        }
    }
    String::from_utf8(bytes).expect("utf-8 text")
}

/// The keys of a `get -w json` answer, in order.
pub fn json_keys(answer: &serde_json::Value) -> Vec<String> {
    answer["kvs"]
        .as_array()
        .map(|kvs| kvs.iter().map(|kv| json_text(&kv["key"])).collect())
        .unwrap_or_default()
}

/// Splits etcdctl's simple output into lines.
pub fn lines(output: &str) -> Vec<&str> {
    output.lines().collect()
}

/// `put key value`, which must print OK.
pub fn put(ep: &str, key: &str, value: &str) {
    assert_eq!(
        etcdctl_ok(ep, &["put", key, value]).trim(),
        "OK",
        "put {key}"
    );
}

/// The store revision, from the header of a read.
pub fn revision(ep: &str) -> i64 {
    etcdctl_json(ep, &["get", "capstan-tests/probe"])["header"]["revision"]
        .as_i64()
        .expect("header revision")
}

/// `lease grant <ttl>`; returns the lease id in hex as etcdctl prints it.
pub fn grant(ep: &str, ttl: u32) -> String {
    let out = etcdctl_ok(ep, &["lease", "grant", &ttl.to_string()]);
    let id = out
        .strip_prefix("lease ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("unexpected lease grant output {out:?}"));
    assert_eq!(out.trim(), format!("lease {id} granted with TTL({ttl}s)"));
    id.to_string()
}

/// The role the API server's store user is given by [`api_server_auth_steps`].
pub const API_SERVER_ROLE: &str = "kube-apiserver";

/// etcdctl's steps, as etcd's documentation and kube's operators take
/// them, that make `user` (the common name of the API server's store
/// client certificate) a user without a password whose role reads and
/// writes `/registry/` and `compact_rev_key`, add a root that logs in with
/// `root_password`, and turn auth on.
pub fn api_server_auth_steps(user: &str, root_password: &str) -> Vec<Vec<String>> {
    let role = API_SERVER_ROLE;
    let steps: [&[&str]; 7] = [
        &["user", "add", &format!("root:{root_password}")],
        &["user", "add", user, "--no-password"],
        &["role", "add", role],
        &[
            "role",
            "grant-permission",
            "--prefix",
            role,
            "readwrite",
            "/registry/",
        ],
        &[
            "role",
            "grant-permission",
            role,
            "readwrite",
            "compact_rev_key",
        ],
        &["user", "grant-role", user, role],
        &["auth", "enable"],
    ];
    steps
        .iter()
        .map(|args| args.iter().map(|arg| arg.to_string()).collect())
        .collect()
}
