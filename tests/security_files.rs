//! What `capstan` leaves on disk is readable by its owner only wherever it
//! holds a secret: every private key, the encryption configuration, the
//! admin kubeconfig (also one an older build left with a looser mode) and
//! the audit log with its rotated backups (Request-level events hold
//! Secrets). And the embedded default encrypts Secrets with secretbox:
//! a data folder an older build made with an aescbc key still starts and
//! reads its Secrets, and rewriting them moves them to secretbox.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use capstan_apiserver::pki::Pki;
use capstan_tests::apiserver::Kubectl;
use capstan_tests::etcdctl::etcdctl;
use capstan_tests::http::Connection;
use capstan_tests::store::http_get;
use capstan_tests::{binary, free_port, tls, watchdog};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

/// `capstan` on a data folder of the test's choosing, with extra flags;
/// killed when dropped.
struct Capstan {
    child: Child,
    _watchdog: watchdog::Watchdog,
    data: PathBuf,
    port: u16,
    store_port: u16,
}

impl Capstan {
    fn start(data: &Path, extra: &[String]) -> Capstan {
        let (port, store_port) = (free_port(), free_port());
        tls::register(port, &data.join("pki"));
        tls::register_store(store_port, &data.join("pki"));
        let log = data.with_extension("log");
        let child = Command::new(binary("capstan"))
            .arg("--data-dir")
            .arg(data)
            .args(["--secure-port", &port.to_string()])
            .args(["--store-port", &store_port.to_string()])
            .args(["--peer-port", &free_port().to_string()])
            .args(["--log-level", "warn"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("a log file"))
            .spawn()
            .expect("start capstan");
        watchdog::track(child.id());
        let capstan = Capstan {
            child,
            _watchdog: watchdog::arm(),
            data: data.to_path_buf(),
            port,
            store_port,
        };
        let deadline = std::time::Instant::now() + WAIT;
        while http_get(port, "/readyz").is_none() {
            let log = || std::fs::read_to_string(&log).unwrap_or_default();
            assert!(
                std::time::Instant::now() < deadline,
                "capstan did not become ready; its log:\n{}",
                log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        capstan
    }

    fn kubectl(&self) -> Kubectl {
        Kubectl {
            kubeconfig: self.data.join("kubeconfig"),
            cache_dir: self.data.with_extension("kube-cache"),
        }
    }

    /// What the store holds under `key` (etcdctl with the store's client
    /// certificate).
    fn stored(&self, key: &str) -> String {
        let pki = Pki::at(&self.data.join("pki"));
        let flags = [
            format!("--cacert={}", pki.store_ca().display()),
            format!("--cert={}", pki.store_client_cert().display()),
            format!("--key={}", pki.store_client_key().display()),
        ];
        let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
        args.extend(["get", key, "--print-value-only"]);
        let endpoint = format!("https://127.0.0.1:{}", self.store_port);
        let run = etcdctl(&endpoint, &args, None);
        assert!(run.ok, "{}", run.stderr);
        run.stdout
    }
}

impl Drop for Capstan {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        watchdog::untrack(self.child.id());
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

fn assert_private(path: &Path) {
    assert_eq!(
        mode(path),
        0o600,
        "{} must be readable by its owner only",
        path.display()
    );
}

/// Every file under `dir` whose name ends with `suffix`.
fn files_under(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read a folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            found.extend(files_under(&path, suffix));
        } else if path.to_string_lossy().ends_with(suffix) {
            found.push(path);
        }
    }
    found
}

fn write_with_mode(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).expect("write a file");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// An audit policy recording ConfigMaps with their bodies, so a few large
/// ones fill the log past one megabyte and rotate it.
fn audit_flags(dir: &Path) -> Vec<String> {
    let policy = dir.join("audit-policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n\
- level: RequestResponse\n  resources: [{group: \"\", resources: [configmaps]}]\n- level: None\n",
    )
    .expect("write the audit policy");
    let log = dir.join("audit").join("audit.log");
    vec![
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", log.display()),
        "--audit-log-maxsize=1".into(),
        "--audit-log-maxbackup=5".into(),
    ]
}

#[test]
fn files_holding_secrets_are_readable_by_their_owner_only() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let data = dir.path().join("data");
    std::fs::create_dir_all(dir.path().join("audit")).expect("mkdir");
    std::fs::create_dir_all(&data).expect("mkdir");
    // What an older build (or a careless copy) left: a world-readable
    // kubeconfig and audit log.
    write_with_mode(&data.join("kubeconfig"), "stale", 0o644);
    let audit_log = dir.path().join("audit").join("audit.log");
    write_with_mode(&audit_log, "", 0o644);
    let capstan = Capstan::start(&data, &audit_flags(dir.path()));

    let keys = files_under(&data.join("pki"), ".key");
    assert!(keys.len() >= 8, "the keys: {keys:?}");
    for key in &keys {
        assert_private(key);
    }
    assert_private(&data.join("pki").join("encryption-config.yaml"));
    assert_private(&data.join("kubeconfig"));
    assert_eq!(mode(&data.join("pki")), 0o700, "the folder of the keys");
    assert_private(&audit_log);

    // ConfigMaps of 200 KB, recorded with their bodies, until the log
    // has rotated; the backups are as private as the log.
    let mut connection = Connection::connect(capstan.port).expect("connect");
    let backups = |dir: &Path| -> Vec<PathBuf> {
        files_under(dir, ".log")
            .into_iter()
            .filter(|p| p.file_name().is_some_and(|n| n != "audit.log"))
            .collect()
    };
    let audit_dir = dir.path().join("audit");
    for i in 0.. {
        if !backups(&audit_dir).is_empty() {
            break;
        }
        assert!(i < 40, "the audit log never rotated");
        let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("filler-{i}")}, "data": {"x": "x".repeat(200_000)}});
        let (code, body) = connection
            .json(
                "POST",
                "/api/v1/namespaces/default/configmaps",
                Some(&configmap),
            )
            .expect("create a ConfigMap");
        assert_eq!(code, 201, "{body}");
        std::thread::sleep(Duration::from_millis(100));
    }
    for backup in backups(&audit_dir) {
        assert_private(&backup);
    }
    assert_private(&audit_log);
    let out = capstan
        .kubectl()
        .ok(&["get", "ns", "default", "-o", "name"]);
    assert_eq!(
        out.trim(),
        "namespace/default",
        "the kubeconfig was rewritten"
    );
}

/// The EncryptionConfiguration an older `capstan` wrote on first start:
/// one aescbc key, then identity.
const OLDER_CONFIGURATION: &str = r#"apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources:
  - secrets
  providers:
  - aescbc:
      keys:
      - name: key1
        secret: MTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTE=
  - identity: {}
"#;

#[test]
fn an_older_aescbc_data_folder_reads_its_secrets_and_a_rewrite_moves_them_to_secretbox() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("pki")).expect("mkdir");
    let generated = data.join("pki").join("encryption-config.yaml");
    write_with_mode(&generated, OLDER_CONFIGURATION, 0o600);
    let key = "/registry/secrets/default/kept";
    {
        // The older build's configuration given as a flag is used as it
        // is: the Secret is written with aescbc, as the older build did.
        let older = dir.path().join("older.yaml");
        write_with_mode(&older, OLDER_CONFIGURATION, 0o600);
        let flag = format!("--encryption-provider-config={}", older.display());
        let capstan = Capstan::start(&data, &[flag]);
        capstan.kubectl().ok(&[
            "create",
            "secret",
            "generic",
            "kept",
            "--from-literal=password=hunter2",
        ]);
        let stored = capstan.stored(key);
        assert!(stored.starts_with("k8s:enc:aescbc:v1:key1:"), "{stored:?}");
    }
    let capstan = Capstan::start(&data, &[]);
    let text = std::fs::read_to_string(&generated).expect("the configuration");
    let secretbox = text.find("secretbox").expect("a secretbox key now");
    let aescbc = text.find("aescbc").expect("the older key is kept");
    assert!(
        secretbox < aescbc,
        "secretbox writes, aescbc reads:\n{text}"
    );
    assert!(text.contains("MTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTE="));
    assert_private(&generated);
    let kubectl = capstan.kubectl();
    let password = kubectl.ok(&["get", "secret", "kept", "-o", "jsonpath={.data.password}"]);
    assert_eq!(password, "aHVudGVyMg==", "the older Secret reads");
    assert!(capstan.stored(key).starts_with("k8s:enc:aescbc:v1:key1:"));
    // kube's way to re-encrypt: read every Secret and write it back.
    let all = kubectl.ok(&["get", "secrets", "-o", "json"]);
    kubectl.ok_with_input(&["replace", "-f", "-"], &all);
    let stored = capstan.stored(key);
    assert!(stored.starts_with("k8s:enc:secretbox:v1:"), "{stored:?}");
    kubectl.ok(&["create", "secret", "generic", "new", "--from-literal=a=b"]);
    let stored = capstan.stored("/registry/secrets/default/new");
    assert!(stored.starts_with("k8s:enc:secretbox:v1:"), "{stored:?}");
}
