//! `make cluster`'s shape for the density run: three `capstan-store`
//! members and two `capstan-apiserver`s over TLS, with the certificates
//! `capstan certificates` makes. The first API server starts alone until
//! its controller manager holds the Lease `kube-system/kube-controller-manager`,
//! so the bench knows which server leads the controllers (the holder's
//! identity names a host, not a process) and can kill it mid-ramp; the
//! bench's clients and the nodes use the second, which survives.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use tempfile::TempDir;

use super::control_plane::{controller_rates, wait_until, ControlPlane, Shape};
use crate::apiserver::http::Connection;
use crate::scheduling::processes::{binary, Process};
use crate::servers::free_ports;

/// The API server that leads the controllers (started first).
pub const LEADING_APISERVER: &str = "apiserver-1";
const STORE_NAMES: [&str; 3] = ["store-1", "store-2", "store-3"];
const APISERVER_NAMES: [&str; 2] = [LEADING_APISERVER, "apiserver-2"];

pub fn start(shape: &Shape, dir: TempDir, scheduler_config: &Path) -> Result<ControlPlane, String> {
    let ports = free_ports(10).map_err(|e| format!("free ports: {e}"))?;
    let (store_ports, api_ports) = ports.split_at(6);
    let pki = dir.path().join("pki");
    certificates(&pki, api_ports[2])?;
    let mut processes = Vec::new();
    let mut store_dirs = Vec::new();
    let initial = (0..3)
        .map(|i| format!("m{}=https://127.0.0.1:{}", i + 1, store_ports[2 * i + 1]))
        .collect::<Vec<_>>()
        .join(",");
    for (i, name) in STORE_NAMES.iter().enumerate() {
        let data = dir.path().join(format!("m{}", i + 1));
        let (client, peer) = (store_ports[2 * i], store_ports[2 * i + 1]);
        processes.push(start_store(
            i + 1,
            name,
            &data,
            &pki,
            (client, peer),
            &initial,
            dir.path(),
        )?);
        store_dirs.push(data);
    }
    let endpoints = (0..3)
        .map(|i| format!("https://127.0.0.1:{}", store_ports[2 * i]))
        .collect::<Vec<_>>()
        .join(",");
    for (i, name) in APISERVER_NAMES.iter().enumerate() {
        let (secure, plain) = (api_ports[2 * i], api_ports[2 * i + 1]);
        let server = ApiServer {
            name,
            secure,
            plain,
            endpoints: &endpoints,
            pki: &pki,
        };
        let mut process = server.spawn(shape, scheduler_config, dir.path())?;
        // The stores elect a leader while the first server waits for them.
        process.wait_ready(plain, shape.startup_timeout * 4)?;
        processes.push(process);
        if i == 0 {
            wait_for_controller_leader(plain, shape.startup_timeout * 4)?;
        }
    }
    Ok(ControlPlane::assemble(
        processes,
        api_ports[3],
        vec![api_ports[1], api_ports[3]],
        pki.join("kubeconfig"),
        store_dirs,
        dir,
    ))
}

/// The cluster's certificates, the admin kubeconfig pointing at the
/// API server on `server_port`.
fn certificates(pki: &Path, server_port: u16) -> Result<(), String> {
    let mut command = Command::new(binary("capstan")?);
    command.arg("certificates").arg("--dir").arg(pki);
    for i in 1..=3 {
        command.args(["--store-member", &format!("m{i}=127.0.0.1,localhost")]);
    }
    command.args(["--server", &format!("https://127.0.0.1:{server_port}")]);
    let output = command
        .output()
        .map_err(|e| format!("capstan certificates: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "capstan certificates: {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(())
}

fn start_store(
    number: usize,
    name: &'static str,
    data: &Path,
    pki: &Path,
    (client, peer): (u16, u16),
    initial: &str,
    logs: &Path,
) -> Result<Process, String> {
    let etcd = pki.join("etcd");
    let member_cert = etcd.join(format!("m{number}.crt"));
    let member_key = etcd.join(format!("m{number}.key"));
    let ca = etcd.join("ca.crt");
    let mut command = Command::new(binary("capstan-store")?);
    command
        .args(["--name", &format!("m{number}")])
        .arg("--data-dir")
        .arg(data)
        .args([
            "--listen-client-urls",
            &format!("https://127.0.0.1:{client}"),
        ])
        .args(["--listen-peer-urls", &format!("https://127.0.0.1:{peer}")])
        .args([
            "--initial-cluster",
            initial,
            "--client-cert-auth",
            "--peer-client-cert-auth",
        ]);
    for (flag, file) in [
        ("--cert-file", &member_cert),
        ("--key-file", &member_key),
        ("--trusted-ca-file", &ca),
        ("--peer-cert-file", &member_cert),
        ("--peer-key-file", &member_key),
        ("--peer-trusted-ca-file", &ca),
    ] {
        command.arg(flag).arg(file);
    }
    Process::spawn(name, &mut command, logs.join(format!("{name}.log")))
}

/// One API server's place in the cluster.
struct ApiServer<'a> {
    name: &'static str,
    secure: u16,
    plain: u16,
    endpoints: &'a str,
    pki: &'a Path,
}

impl ApiServer<'_> {
    fn spawn(
        &self,
        shape: &Shape,
        scheduler_config: &Path,
        logs: &Path,
    ) -> Result<Process, String> {
        let file = |name: &str| self.pki.join(name);
        let mut command = Command::new(binary("capstan-apiserver")?);
        command
            .args([
                "--etcd-servers",
                self.endpoints,
                "--bind-address",
                "127.0.0.1",
            ])
            .args(["--secure-port", &self.secure.to_string()])
            .args([
                "--insecure-port",
                &self.plain.to_string(),
                "--log-level",
                "warn",
            ]);
        for (flag, name) in [
            ("--etcd-cafile", "etcd/ca.crt"),
            ("--etcd-certfile", "etcd/client.crt"),
            ("--etcd-keyfile", "etcd/client.key"),
            ("--tls-cert-file", "serving.crt"),
            ("--tls-private-key-file", "serving.key"),
            ("--client-ca-file", "client-ca.crt"),
            ("--service-account-key-file", "service-account.key"),
            ("--service-account-signing-key-file", "service-account.key"),
            ("--encryption-provider-config", "encryption-config.yaml"),
        ] {
            command.arg(flag).arg(file(name));
        }
        command.arg("--scheduler-config").arg(scheduler_config);
        controller_rates(&mut command, shape.controller_qps);
        Process::spawn(
            self.name,
            &mut command,
            logs.join(format!("{}.log", self.name)),
        )
    }
}

/// The holder of the controller manager's Lease, if any, read on `port`.
pub async fn controller_leader(port: u16) -> Option<String> {
    let path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager";
    let answer = Connection::new(port, Duration::from_secs(5))
        .get(path)
        .await
        .ok()?;
    let lease: serde_json::Value = serde_json::from_slice(&answer.body).ok()?;
    lease["spec"]["holderIdentity"]
        .as_str()
        .filter(|holder| !holder.is_empty())
        .map(str::to_string)
}

fn wait_for_controller_leader(port: u16, timeout: Duration) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    wait_until(
        "the first API server's controller manager leads",
        timeout,
        || runtime.block_on(controller_leader(port)).is_some(),
    )
}
