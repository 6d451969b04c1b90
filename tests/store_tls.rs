//! TLS for the store, with etcd's flags, on capstan-store and on a real
//! etcd 3.4 alike: etcdctl with `--cacert --cert --key` works and a client
//! without a trusted certificate is refused; members talk to each other
//! over TLS and refuse a peer without a certificate; the API server
//! reaches a TLS store with kube's `--etcd-cafile/--etcd-certfile/
//! --etcd-keyfile`, and a malformed certificate file stops it at start
//! with a message naming the file. `capstan`'s API server reaches its
//! embedded store in process as the user its store certificate names.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use capstan_tests::apiserver::{secure_flags, ApiServer, Backend, Embedded, Http, BACKENDS};
use capstan_tests::certs::{Authority, Pair};
use capstan_tests::etcdctl::{api_server_auth_steps, API_SERVER_ROLE};
use capstan_tests::poll::wait_for;
use capstan_tests::watchdog::{self, Watchdog};
use capstan_tests::{binary, free_port};

const PATIENCE: Duration = Duration::from_secs(30);

/// The certificates of one test: a CA, a member certificate, an admitted
/// client, and a client signed by a CA the members do not trust.
struct Certs {
    ca: PathBuf,
    member: Pair,
    client: Pair,
    stranger: Pair,
}

impl Certs {
    fn new(dir: &Path) -> Certs {
        let ca = Authority::new(dir, "store-ca");
        let other = Authority::new(dir, "other-ca");
        Certs {
            ca: ca.cert_file.clone(),
            member: ca.server(dir, "member"),
            client: ca.client(dir, "root"),
            stranger: other.client(dir, "stranger"),
        }
    }

    /// etcdctl's flags for a client presenting `pair`.
    fn etcdctl_flags(&self, pair: Option<&Pair>) -> Vec<String> {
        let mut flags = vec![format!("--cacert={}", self.ca.display())];
        if let Some(pair) = pair {
            flags.push(format!("--cert={}", pair.cert_file.display()));
            flags.push(format!("--key={}", pair.key_file.display()));
        }
        flags
    }
}

/// One member, capstan-store or etcd, with the same (etcd's) flags.
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    args: Vec<String>,
    binary: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    _watchdog: Watchdog,
}

impl Member {
    fn client_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.client_port)
    }

    fn start(&mut self) {
        let log = std::fs::File::create(&self.log).expect("member log");
        let child = Command::new(&self.binary)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start a member");
        watchdog::track(child.id());
        self.child = Some(child);
    }

    fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            watchdog::untrack(child.id());
        }
    }

    fn assert_running(&mut self) {
        let child = self.child.as_mut().expect("started");
        if let Some(status) = child.try_wait().expect("poll the member") {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            panic!("member {} exited ({status}):\n{log}", self.name);
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn server_binary(backend: Backend) -> PathBuf {
    match backend {
        Backend::Capstan => binary("capstan-store"),
        Backend::Etcd => PathBuf::from("etcd"),
    }
}

/// `size` members with TLS on both ports, client certificates required
/// on both, started.
fn cluster(backend: Backend, dir: &Path, certs: &Certs, size: usize) -> Vec<Member> {
    let ports: Vec<(u16, u16)> = (0..size).map(|_| (free_port(), free_port())).collect();
    let initial: Vec<String> = ports
        .iter()
        .enumerate()
        .map(|(i, (_, peer))| format!("m{i}=https://127.0.0.1:{peer}"))
        .collect();
    let (cert, key) = (&certs.member.cert_file, &certs.member.key_file);
    let mut members: Vec<Member> = ports
        .iter()
        .enumerate()
        .map(|(i, &(client_port, peer_port))| {
            let name = format!("m{i}");
            let client = format!("https://127.0.0.1:{client_port}");
            let peer = format!("https://127.0.0.1:{peer_port}");
            let args = [
                ("--name", name.clone()),
                ("--data-dir", dir.join(&name).display().to_string()),
                ("--listen-client-urls", client.clone()),
                ("--advertise-client-urls", client),
                ("--listen-peer-urls", peer.clone()),
                ("--initial-advertise-peer-urls", peer),
                ("--initial-cluster", initial.join(",")),
                ("--cert-file", cert.display().to_string()),
                ("--key-file", key.display().to_string()),
                ("--trusted-ca-file", certs.ca.display().to_string()),
                ("--peer-cert-file", cert.display().to_string()),
                ("--peer-key-file", key.display().to_string()),
                ("--peer-trusted-ca-file", certs.ca.display().to_string()),
            ];
            let mut args: Vec<String> = args
                .into_iter()
                .map(|(flag, value)| format!("{flag}={value}"))
                .collect();
            args.push("--client-cert-auth".into());
            args.push("--peer-client-cert-auth".into());
            Member {
                log: dir.join(format!("{name}.log")),
                name,
                client_port,
                peer_port,
                args,
                binary: server_binary(backend),
                child: None,
                _watchdog: watchdog::arm(),
            }
        })
        .collect();
    members.iter_mut().for_each(Member::start);
    for member in &mut members {
        wait_healthy(member, certs);
    }
    members
}

fn wait_healthy(member: &mut Member, certs: &Certs) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        member.assert_running();
        let flags = certs.etcdctl_flags(Some(&certs.client));
        if etcdctl(&member.client_url(), &flags, &["endpoint", "health"]).0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "member {} never healthy",
            member.name
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Runs etcdctl; (succeeded, stdout + stderr).
fn etcdctl(endpoint: &str, flags: &[String], args: &[&str]) -> (bool, String) {
    let output = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoint}"))
        .arg("--dial-timeout=2s")
        .arg("--command-timeout=5s")
        .args(flags)
        .args(args)
        .output()
        .expect("etcdctl is installed");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[test]
fn etcdctl_over_tls_needs_a_client_certificate_the_store_trusts() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let certs = Certs::new(dir.path());
        let members = cluster(backend, dir.path(), &certs, 1);
        let url = members[0].client_url();
        let admitted = certs.etcdctl_flags(Some(&certs.client));
        let (ok, out) = etcdctl(&url, &admitted, &["put", "greeting", "hello"]);
        assert!(ok, "{backend:?}: a trusted client writes: {out}");
        let (ok, out) = etcdctl(&url, &admitted, &["get", "greeting", "--print-value-only"]);
        assert!(ok && out.trim() == "hello", "{backend:?}: and reads: {out}");

        let refused = [
            ("no client certificate", certs.etcdctl_flags(None)),
            (
                "a certificate of another CA",
                certs.etcdctl_flags(Some(&certs.stranger)),
            ),
        ];
        for (what, flags) in refused {
            let (ok, out) = etcdctl(&url, &flags, &["put", "greeting", "intruder"]);
            assert!(
                !ok,
                "{backend:?}: a client with {what} is refused, yet: {out}"
            );
        }
        let plain = format!("http://127.0.0.1:{}", members[0].client_port);
        let (ok, out) = etcdctl(&plain, &[], &["put", "greeting", "plain"]);
        assert!(!ok, "{backend:?}: plain HTTP is refused, yet: {out}");
        let (_, out) = etcdctl(&url, &admitted, &["get", "greeting", "--print-value-only"]);
        assert_eq!(
            out.trim(),
            "hello",
            "{backend:?}: a refused write changed nothing"
        );
    }
}

#[test]
fn members_replicate_over_peer_tls_and_survive_a_member_kill() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let certs = Certs::new(dir.path());
        let mut members = cluster(backend, dir.path(), &certs, 3);
        let flags = certs.etcdctl_flags(Some(&certs.client));
        let all: Vec<String> = members.iter().map(Member::client_url).collect();
        for i in 0..20 {
            let (ok, out) = etcdctl(&all.join(","), &flags, &["put", &format!("k{i:02}"), "v"]);
            assert!(ok, "{backend:?}: write {i}: {out}");
        }
        members[0].kill9();
        let rest = all[1..].join(",");
        wait_for(PATIENCE, "a write with one member down", || {
            etcdctl(&rest, &flags, &["put", "k20", "v"]).0.then_some(())
        });
        members[0].start();
        // The restarted member catches up through its TLS peer links.
        let args = [
            "get",
            "k",
            "--prefix",
            "--keys-only",
            "--consistency=s",
            "-w",
            "json",
        ];
        let deadline = Instant::now() + PATIENCE;
        loop {
            let (ok, out) = etcdctl(&all[0], &flags, &args);
            if ok && out.contains("\"count\":21") {
                break;
            }
            members[0].assert_running();
            let log = std::fs::read_to_string(&members[0].log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            assert!(
                Instant::now() < deadline,
                "{backend:?}: the restarted member did not catch up: {out}\n{}",
                tail.join("\n")
            );
            std::thread::sleep(Duration::from_millis(300));
        }
        if backend == Backend::Capstan {
            peer_port_refuses_a_client_without_certificate(&members[1], &certs);
            // Raft's messages went over the direct links, through TLS.
            let log = std::fs::read_to_string(&members[0].log).unwrap_or_default();
            let tls_link = log
                .lines()
                .any(|line| line.contains("peer link up") && line.contains("tls=true"));
            assert!(tls_link, "no TLS link came up:\n{log}");
        }
    }
}

/// The peer port speaks TLS and demands a certificate: a TLS client with
/// the CA but no certificate gets no answer at all (a transport error),
/// while one with a certificate reaches the peer service (which does not
/// serve the KV API: Unimplemented).
fn peer_port_refuses_a_client_without_certificate(member: &Member, certs: &Certs) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let url = format!("https://127.0.0.1:{}", member.peer_port);
    let code = |identity: Option<&Pair>| {
        let url = url.clone();
        runtime.block_on(async move {
            let mut tls = etcd_client::TlsOptions::new().ca_certificate(
                etcd_client::Certificate::from_pem(std::fs::read(&certs.ca).unwrap()),
            );
            if let Some(pair) = identity {
                tls = tls.identity(etcd_client::Identity::from_pem(
                    std::fs::read(&pair.cert_file).unwrap(),
                    std::fs::read(&pair.key_file).unwrap(),
                ));
            }
            let options = etcd_client::ConnectOptions::new()
                .with_tls(tls)
                .with_connect_timeout(Duration::from_secs(2))
                .with_timeout(Duration::from_secs(3));
            match etcd_client::Client::connect([url], Some(options)).await {
                Err(err) => format!("connect: {err}"),
                Ok(mut client) => match client.get("k", None).await {
                    Err(etcd_client::Error::GRpcStatus(status)) => format!("{:?}", status.code()),
                    Err(err) => format!("transport: {err}"),
                    Ok(_) => "answered".to_string(),
                },
            }
        })
    };
    assert_eq!(code(Some(&certs.member)), "Unimplemented");
    let refused = code(None);
    assert_ne!(
        refused, "Unimplemented",
        "a peer without certificate was served"
    );
    assert_ne!(refused, "answered");
}

#[test]
fn the_api_server_reaches_a_tls_store_with_kubes_etcd_flags() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let certs = Certs::new(dir.path());
        let members = cluster(backend, dir.path(), &certs, 1);
        let url = members[0].client_url();
        let tls = [
            format!("--etcd-cafile={}", certs.ca.display()),
            format!("--etcd-certfile={}", certs.client.cert_file.display()),
            format!("--etcd-keyfile={}", certs.client.key_file.display()),
        ];
        let tls: Vec<&str> = tls.iter().map(String::as_str).collect();
        let api = ApiServer::start_with(std::slice::from_ref(&url), dir.path(), "api", &tls);
        let mut http = Http::connect(api.port);
        let object = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "over-tls"}, "data": {"a": "b"}
        });
        let path = "/api/v1/namespaces/default/configmaps";
        let (code, body) = http.request("POST", path, Some(&object));
        assert_eq!(code, 201, "{backend:?}: {body}");
        let flags = certs.etcdctl_flags(Some(&certs.client));
        let args = [
            "get",
            "/registry/configmaps/default/over-tls",
            "--keys-only",
        ];
        let (ok, out) = etcdctl(&url, &flags, &args);
        assert!(ok && out.contains("over-tls"), "{backend:?}: stored: {out}");
    }
}

#[test]
fn a_malformed_certificate_file_stops_the_api_server_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk-ca.crt");
    std::fs::write(&junk, "this is not a certificate").unwrap();
    let output = Command::new(binary("capstan-apiserver"))
        .args(["--etcd-servers", "https://127.0.0.1:1"])
        .args(secure_flags(dir.path(), free_port()))
        .arg(format!("--etcd-cafile={}", junk.display()))
        .output()
        .expect("run capstan-apiserver");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "it must not start: {stderr}");
    assert!(
        stderr.contains("junk-ca.crt") && stderr.contains("not a PEM file"),
        "the message names the file and the problem: {stderr}"
    );
}

#[test]
fn a_member_with_half_a_tls_configuration_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let certs = Certs::new(dir.path());
    let output = Command::new(binary("capstan-store"))
        .arg(format!("--data-dir={}", dir.path().join("m").display()))
        .arg(format!("--cert-file={}", certs.member.cert_file.display()))
        .arg(format!(
            "--listen-client-urls=https://127.0.0.1:{}",
            free_port()
        ))
        .arg(format!(
            "--listen-peer-urls=http://127.0.0.1:{}",
            free_port()
        ))
        .output()
        .expect("run capstan-store");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "it must not start: {stderr}");
    assert!(
        stderr.contains("--cert-file and --key-file must be given together"),
        "{stderr}"
    );
}

/// `capstan`, the embedded default, runs its store over TLS with its own
/// CA under `data/pki/etcd`: etcdctl with those files reads what kubectl
/// wrote, and a client without the store's client certificate (even one
/// with the API server's admin certificate), or over plain HTTP, is refused.
#[test]
fn the_embedded_store_speaks_tls_with_its_own_ca() {
    let server = Embedded::start();
    server
        .kubectl
        .ok(&["create", "configmap", "over-tls", "--from-literal=k=v"]);
    let pki = server.pki();
    let file = |path: PathBuf| path.display().to_string();
    let admitted = store_client_flags(&server);
    let url = server.store_url();
    let key = "/registry/configmaps/default/over-tls";
    let (ok, out) = etcdctl(&url, &admitted, &["get", key, "--keys-only"]);
    assert!(ok && out.contains(key), "the store's client reads: {out}");

    let refused = [
        ("no client certificate", admitted[..1].to_vec()),
        (
            "the API server's admin certificate",
            vec![
                admitted[0].clone(),
                format!("--cert={}", file(pki.admin_cert())),
                format!("--key={}", file(pki.admin_key())),
            ],
        ),
    ];
    for (what, flags) in refused {
        let (ok, out) = etcdctl(&url, &flags, &["put", "intruder", "x"]);
        assert!(!ok, "a client with {what} is refused, yet: {out}");
    }
    let plain = format!("http://127.0.0.1:{}", server.store_port);
    let (ok, out) = etcdctl(&plain, &[], &["put", "intruder", "x"]);
    assert!(!ok, "plain HTTP is refused, yet: {out}");
    let (_, out) = etcdctl(&url, &admitted, &["get", "intruder", "--keys-only"]);
    assert!(out.trim().is_empty(), "nothing was written: {out}");
}

/// etcdctl's TLS flags for `capstan`'s embedded store, as the store client
/// certificate `capstan` made.
fn store_client_flags(server: &Embedded) -> Vec<String> {
    let pki = server.pki();
    let file = |path: PathBuf| path.display().to_string();
    vec![
        format!("--cacert={}", file(pki.store_ca())),
        format!("--cert={}", file(pki.store_client_cert())),
        format!("--key={}", file(pki.store_client_key())),
    ]
}

/// The embedded API server reaches its store in process, not over TLS, yet
/// as the same user: the common name of the store client certificate
/// `capstan` made. With etcd's auth turned on and that user limited to
/// `/registry/` (etcd's documented set-up), kubectl's writes still land;
/// once the role loses `/registry/`, they are refused and nothing lands.
#[test]
fn the_embedded_api_server_is_its_store_client_certificates_user() {
    let server = Embedded::start();
    let client = store_client_flags(&server);
    let url = server.store_url();
    let user = "kube-apiserver-etcd-client";
    for args in api_server_auth_steps(user, "root-pw") {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, out) = etcdctl(&url, &client, &args);
        assert!(ok, "etcdctl {args:?}: {out}");
    }
    server
        .kubectl
        .ok(&["create", "configmap", "under-auth", "--from-literal=k=v"]);
    let mut root = client.clone();
    root.push("--user=root:root-pw".into());
    let key = "/registry/configmaps/default/under-auth";
    let (ok, out) = etcdctl(&url, &root, &["get", key, "--keys-only"]);
    assert!(ok && out.contains(key), "the write landed: {out}");

    let revoke = [
        "role",
        "revoke-permission",
        API_SERVER_ROLE,
        "/registry/",
        "--prefix",
    ];
    let (ok, out) = etcdctl(&url, &root, &revoke);
    assert!(ok, "etcdctl {revoke:?}: {out}");
    let refused = server
        .kubectl
        .fails(&["create", "configmap", "no-longer", "--from-literal=k=v"]);
    assert!(refused.contains("permission denied"), "{refused}");
    let key = "/registry/configmaps/default/no-longer";
    let (_, out) = etcdctl(&url, &root, &["get", key, "--keys-only"]);
    assert!(!out.contains(key), "nothing landed: {out}");
}
