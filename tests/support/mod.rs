//! Helpers for process-level tests: build and start the real binaries on
//! free loopback ports, drive them with real clients, kill them for real.

pub mod answers;
pub mod api_requests;
pub mod apiserver;
pub mod audit_log;
pub mod certs;
pub mod checker;
pub mod client;
pub mod cluster;
pub mod component;
pub mod etcdctl;
pub mod etcdctl_watch;
pub mod faults;
pub mod grpc_raw;
pub mod history;
pub mod history_etcd;
pub mod history_kube;
pub mod history_leases;
pub mod http;
pub mod keyspace;
pub mod kubectl;
pub mod metrics_server;
pub mod mutate;
pub mod poll;
pub mod python;
pub mod sim_nodes;
pub mod store;
pub mod tls;
pub mod tokens;
pub mod watch;
pub mod watchdog;
pub mod webhook;
pub mod webhook_config;
pub mod writers;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The workspace's root folder.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace")
        .to_path_buf()
}

/// Path of a workspace binary, building the workspace binaries once per
/// test process so `cargo test` alone is enough.
pub fn binary(name: &str) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let mut cargo = Command::new(env!("CARGO"));
        // Cargo gives a running test its package's variables; build
        // scripts that watch one of them (ring's watches
        // CARGO_MANIFEST_DIR) would see it change between this build and
        // the next one from a shell, and rebuild half the tree each time.
        for (name, _) in std::env::vars_os() {
            if is_test_only_cargo_variable(&name.to_string_lossy()) {
                cargo.env_remove(&name);
            }
        }
        let status = cargo
            .args(["build", "--bins", "--quiet"])
            .current_dir(workspace_root())
            .status()
            .expect("run cargo build");
        assert!(status.success(), "building the binaries failed");
    });
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let path = target.join("debug").join(name);
    assert!(path.exists(), "{} was not built", path.display());
    path
}

/// Variables cargo sets for the test it runs, not for a shell.
fn is_test_only_cargo_variable(name: &str) -> bool {
    const EXACT: [&str; 6] = [
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_CRATE_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "OUT_DIR",
    ];
    EXACT.contains(&name) || name.starts_with("CARGO_PKG_") || name.starts_with("CARGO_BIN_EXE_")
}

/// A free TCP port on 127.0.0.1 (bound then released). Never the same
/// port twice in one test process: tests run in parallel threads, and a
/// port released by one test (or by a killed store waiting for restart)
/// must not be handed to another, or two tests share one server.
pub fn free_port() -> u16 {
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("find a free port");
        if !handed_out.contains(&port) {
            handed_out.push(port);
            return port;
        }
    }
}
