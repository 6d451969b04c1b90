//! Encryption at rest with kube's `--encryption-provider-config`, on
//! capstan-store and on a real etcd 3.4: what etcdctl reads from the store
//! is ciphertext with kube's prefix, what kubectl reads is the object;
//! values sealed by an independent implementation of kube's format (Python's
//! `cryptography`) read through the API, and values the API server sealed
//! open there; keys rotate as kube's documentation says; a value under a
//! key no longer configured is a 500 naming the key; a malformed
//! configuration stops start-up; `capstan` encrypts Secrets by default.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use capstan_tests::apiserver::{ApiServer, Backend, Embedded, Kubectl, StoreBackend, BACKENDS};
use capstan_tests::etcdctl::{etcdctl, etcdctl_json};
use capstan_tests::poll::wait_for;
use capstan_tests::{binary, watchdog};

const WAIT: Duration = Duration::from_secs(20);

/// 32-byte AES keys (AES-256), a 16-byte one (AES-128), a secretbox key.
const KEY1: &str = "MTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTE=";
const KEY2: &str = "MjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjI=";
const GCM_KEY: &str = "MzMzMzMzMzMzMzMzMzMzMw==";
const BOX_KEY: &str = "NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ=";

/// "hunter2" as a Secret's data holds it.
const PASSWORD_B64: &str = "aHVudGVyMg==";

/// kube's value format, written without our code: `seal` prints the value
/// to store, `open` prints the plain text of a stored value (base64, as
/// etcdctl's JSON gives it). aesgcm authenticates the etcd key.
const KUBE_FORMAT: &str = r#"
import base64, os, sys
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
mode, provider, name, secret, key, data = sys.argv[1:7]
secret = base64.b64decode(secret)
prefix = ("k8s:enc:%s:v1:%s:" % (provider, name)).encode()
if mode == "seal":
    plain = data.encode()
    if provider == "aescbc":
        iv = os.urandom(16)
        padder = padding.PKCS7(128).padder()
        padded = padder.update(plain) + padder.finalize()
        encryptor = Cipher(algorithms.AES(secret), modes.CBC(iv)).encryptor()
        sealed = iv + encryptor.update(padded) + encryptor.finalize()
    else:
        nonce = os.urandom(12)
        sealed = nonce + AESGCM(secret).encrypt(nonce, plain, key.encode())
    sys.stdout.buffer.write(prefix + sealed)
else:
    stored = base64.b64decode(data)
    if not stored.startswith(prefix):
        sys.exit("not sealed with %r: %r" % (prefix, stored[:40]))
    sealed = stored[len(prefix):]
    if provider == "aescbc":
        decryptor = Cipher(algorithms.AES(secret), modes.CBC(sealed[:16])).decryptor()
        padded = decryptor.update(sealed[16:]) + decryptor.finalize()
        unpadder = padding.PKCS7(128).unpadder()
        plain = unpadder.update(padded) + unpadder.finalize()
    else:
        plain = AESGCM(secret).decrypt(sealed[:12], sealed[12:], key.encode())
    sys.stdout.write(plain.decode())
"#;

/// Runs the kube-format script; its stdout.
fn kube_format(args: [&str; 6]) -> Vec<u8> {
    watchdog::waiting_for("python3 kube-format script");
    let output = Command::new("python3")
        .arg("-c")
        .arg(KUBE_FORMAT)
        .args(args)
        .output()
        .expect("python3 is installed (with python3-cryptography)");
    assert!(
        output.status.success(),
        "kube-format script {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// A value sealed as kube-apiserver seals it.
fn kube_seal(provider: &str, name: &str, secret: &str, key: &str, plain: &str) -> Vec<u8> {
    kube_format(["seal", provider, name, secret, key, plain])
}

/// The plain text of a stored value, opened as kube-apiserver opens it.
fn kube_open(provider: &str, name: &str, secret: &str, key: &str, stored_b64: &str) -> String {
    String::from_utf8(kube_format([
        "open", provider, name, secret, key, stored_b64,
    ]))
    .expect("plain text is JSON")
}

/// `etcdctl put key` with raw bytes on stdin.
fn etcdctl_put_raw(flags: &[String], key: &str, value: &[u8]) {
    watchdog::waiting_for(format!("etcdctl put {key}"));
    let mut child = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(flags)
        .args(["put", key])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("etcdctl is installed");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(value)
        .expect("write the value");
    let output = child.wait_with_output().expect("etcdctl runs");
    assert!(
        output.status.success(),
        "etcdctl put {key}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The stored value at `key` as etcdctl's JSON gives it (base64).
fn stored_b64(endpoint: &str, key: &str) -> String {
    let answer = etcdctl_json(endpoint, &["get", key]);
    answer["kvs"][0]["value"]
        .as_str()
        .unwrap_or_else(|| panic!("{key} is not in the store: {answer}"))
        .to_string()
}

/// The stored value at `key`, as text (ciphertext shows as replacement
/// characters after its prefix).
fn stored(endpoint: &str, key: &str) -> String {
    let run = etcdctl(endpoint, &["get", key, "--print-value-only"], None);
    assert!(run.ok, "etcdctl get {key}: {}", run.stderr);
    assert!(!run.stdout.trim().is_empty(), "{key} is not in the store");
    run.stdout
}

/// A provider entry of an EncryptionConfiguration.
fn provider(kind: &str, keys: &[(&str, &str)]) -> String {
    let keys: Vec<String> = keys
        .iter()
        .map(|(name, secret)| format!("{{name: {name}, secret: \"{secret}\"}}"))
        .collect();
    format!("  - {kind}: {{keys: [{}]}}\n", keys.join(", "))
}

/// Writes an EncryptionConfiguration: each resource list with its
/// providers (entries made by [`provider`], or `  - identity: {}\n`).
fn write_config(dir: &Path, file: &str, rules: &[(&str, String)]) -> PathBuf {
    let mut text = String::from(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n",
    );
    for (resources, providers) in rules {
        text.push_str(&format!(
            "- resources: [{resources}]\n  providers:\n{providers}"
        ));
    }
    let path = dir.join(file);
    std::fs::write(&path, text).expect("write the configuration");
    path
}

/// A store and an API server on it with an encryption configuration,
/// which a restart may change.
struct Encrypted {
    api: Option<ApiServer>,
    store: StoreBackend,
    dir: tempfile::TempDir,
    kubectl: Kubectl,
    starts: usize,
}

impl Encrypted {
    fn start(backend: Backend, config: impl Fn(&Path) -> PathBuf) -> Encrypted {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let store = StoreBackend::start(backend, &dir.path().join("store"));
        let config = config(dir.path());
        let api = Encrypted::api(&store, dir.path(), &config, 0);
        let kubectl = Kubectl::new(dir.path(), api.port);
        Encrypted {
            api: Some(api),
            store,
            dir,
            kubectl,
            starts: 1,
        }
    }

    fn api(store: &StoreBackend, dir: &Path, config: &Path, n: usize) -> ApiServer {
        let config = config.display().to_string();
        let flags = ["--encryption-provider-config", config.as_str()];
        ApiServer::start_with(&[store.url()], dir, &format!("apiserver-{n}"), &flags)
    }

    /// Stops the API server and starts another with `config`.
    fn restart(&mut self, config: &Path) {
        drop(self.api.take());
        let api = Encrypted::api(&self.store, self.dir.path(), config, self.starts);
        self.starts += 1;
        self.kubectl = Kubectl::new(self.dir.path(), api.port);
        self.api = Some(api);
    }

    fn endpoint(&self) -> String {
        self.store.url()
    }
}

#[test]
fn encrypted_resources_are_ciphertext_in_the_store_and_objects_through_the_api() {
    for backend in BACKENDS {
        let cluster = Encrypted::start(backend, |dir| {
            let cbc = provider("aescbc", &[("key1", KEY1)]) + "  - identity: {}\n";
            let rules = [
                ("secrets", cbc),
                ("configmaps", provider("aesgcm", &[("key1", GCM_KEY)])),
                (
                    "widgets.example.com",
                    provider("secretbox", &[("key1", BOX_KEY)]),
                ),
            ];
            write_config(dir, "encryption.yaml", &rules)
        });
        let (kubectl, endpoint) = (&cluster.kubectl, cluster.endpoint());
        secrets_are_sealed_with_aescbc(kubectl, &endpoint);
        configmaps_are_sealed_with_aesgcm(kubectl, &endpoint);
        unlisted_resources_stay_plain(kubectl, &endpoint);
        custom_resources_are_sealed_with_secretbox(kubectl, &endpoint);
        values_sealed_by_kube_read_through_the_api(kubectl, &endpoint);
    }
}

fn secrets_are_sealed_with_aescbc(kubectl: &Kubectl, endpoint: &str) {
    kubectl.ok(&[
        "create",
        "secret",
        "generic",
        "s1",
        "--from-literal=password=hunter2",
    ]);
    let key = "/registry/secrets/default/s1";
    let value = stored(endpoint, key);
    assert!(value.starts_with("k8s:enc:aescbc:v1:key1:"), "{value:?}");
    assert!(
        !value.contains("hunter2") && !value.contains(PASSWORD_B64),
        "{value:?}"
    );
    let password = kubectl.ok(&["get", "secret", "s1", "-o", "jsonpath={.data.password}"]);
    assert_eq!(password, PASSWORD_B64);
    // Written by an update too, and still one object through list.
    kubectl.ok(&["label", "secret", "s1", "tier=gold"]);
    let value = stored(endpoint, key);
    assert!(value.starts_with("k8s:enc:aescbc:v1:key1:"), "{value:?}");
    let listed = kubectl.ok(&[
        "get",
        "secrets",
        "-l",
        "tier=gold",
        "-o",
        "jsonpath={.items[*].data.password}",
    ]);
    assert_eq!(listed, PASSWORD_B64);
    // kube's own format opens it: readable the other way round.
    let plain = kube_open("aescbc", "key1", KEY1, key, &stored_b64(endpoint, key));
    let object: serde_json::Value = serde_json::from_str(&plain).expect("JSON inside");
    assert_eq!(object["data"]["password"], PASSWORD_B64);
    assert_eq!(object["metadata"]["labels"]["tier"], "gold");
}

fn configmaps_are_sealed_with_aesgcm(kubectl: &Kubectl, endpoint: &str) {
    kubectl.ok(&[
        "create",
        "configmap",
        "c1",
        "--from-literal=motto=plainly-visible",
    ]);
    let key = "/registry/configmaps/default/c1";
    let value = stored(endpoint, key);
    assert!(value.starts_with("k8s:enc:aesgcm:v1:key1:"), "{value:?}");
    assert!(!value.contains("plainly-visible"), "{value:?}");
    let plain = kube_open("aesgcm", "key1", GCM_KEY, key, &stored_b64(endpoint, key));
    assert!(plain.contains("plainly-visible"), "{plain}");
    let motto = kubectl.ok(&["get", "configmap", "c1", "-o", "jsonpath={.data.motto}"]);
    assert_eq!(motto, "plainly-visible");
    kubectl.ok(&["delete", "configmap", "c1"]);
    let run = etcdctl(endpoint, &["get", key, "--print-value-only"], None);
    assert_eq!(run.stdout.trim(), "", "deleted through its encrypted value");
}

fn unlisted_resources_stay_plain(kubectl: &Kubectl, endpoint: &str) {
    kubectl.ok(&["create", "serviceaccount", "robot"]);
    let value = stored(endpoint, "/registry/serviceaccounts/default/robot");
    assert!(
        value.starts_with('{') && value.contains("\"robot\""),
        "{value:?}"
    );
}

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

fn custom_resources_are_sealed_with_secretbox(kubectl: &Kubectl, endpoint: &str) {
    kubectl.ok_with_input(&["apply", "-f", "-"], CRD);
    kubectl.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
        "--timeout=20s",
    ]);
    let widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: hidden-size}\n";
    wait_for(WAIT, "the widget type is served", || {
        kubectl
            .run_with_input(&["apply", "-f", "-"], widget)
            .status
            .success()
            .then_some(())
    });
    let value = stored(endpoint, "/registry/example.com/widgets/default/w1");
    assert!(value.starts_with("k8s:enc:secretbox:v1:key1:"), "{value:?}");
    assert!(!value.contains("hidden-size"), "{value:?}");
    let size = kubectl.ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.size}"]);
    assert_eq!(size, "hidden-size");
}

/// Values sealed outside our code in kube's format, put with etcdctl,
/// read through kubectl (they reach the watch cache through the store
/// watch, so this is the watch path's decryption too).
fn values_sealed_by_kube_read_through_the_api(kubectl: &Kubectl, endpoint: &str) {
    let flags = [format!("--endpoints={endpoint}")];
    let key = "/registry/secrets/default/from-kube";
    let secret = r#"{"kind":"Secret","apiVersion":"v1","metadata":{"name":"from-kube","namespace":"default","uid":"6f1c1b0e-0000-4000-8000-000000000001","creationTimestamp":"2026-01-01T00:00:00Z"},"data":{"token":"a3ViZQ=="},"type":"Opaque"}"#;
    etcdctl_put_raw(&flags, key, &kube_seal("aescbc", "key1", KEY1, key, secret));
    let token = wait_for(WAIT, "the kube-sealed secret", || {
        let out = kubectl.run(&["get", "secret", "from-kube", "-o", "jsonpath={.data.token}"]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    });
    assert_eq!(token, "a3ViZQ==");
    let key = "/registry/configmaps/default/from-kube";
    let map = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"from-kube","namespace":"default","uid":"6f1c1b0e-0000-4000-8000-000000000002","creationTimestamp":"2026-01-01T00:00:00Z"},"data":{"k":"sealed-by-kube"}}"#;
    etcdctl_put_raw(&flags, key, &kube_seal("aesgcm", "key1", GCM_KEY, key, map));
    let k = wait_for(WAIT, "the kube-sealed config map", || {
        let out = kubectl.run(&["get", "configmap", "from-kube", "-o", "jsonpath={.data.k}"]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    });
    assert_eq!(k, "sealed-by-kube");
}

#[test]
fn keys_rotate_and_a_dropped_key_is_a_500_naming_it() {
    for backend in BACKENDS {
        let mut cluster = Encrypted::start(backend, |dir| {
            write_config(
                dir,
                "key1.yaml",
                &[("secrets", provider("aescbc", &[("key1", KEY1)]))],
            )
        });
        let endpoint = cluster.endpoint();
        cluster.kubectl.ok(&["create", "namespace", "team"]);
        for (name, ns) in [("a", "default"), ("b", "default"), ("c", "team")] {
            let literal = format!("--from-literal=password={name}-secret");
            cluster
                .kubectl
                .ok(&["create", "secret", "generic", name, &literal, "-n", ns]);
        }
        let keys = [
            "/registry/secrets/default/a",
            "/registry/secrets/default/b",
            "/registry/secrets/team/c",
        ];
        let sealed_with = |name: &str| {
            for key in keys {
                let value = stored(&endpoint, key);
                let prefix = format!("k8s:enc:aescbc:v1:{name}:");
                assert!(value.starts_with(&prefix), "{key}: {value:?}");
            }
        };
        sealed_with("key1");

        // The new key first, the old one still there to read.
        let both = [(
            "secrets",
            provider("aescbc", &[("key2", KEY2), ("key1", KEY1)]),
        )];
        cluster.restart(&write_config(cluster.dir.path(), "both.yaml", &both));
        let all = cluster.kubectl.ok(&["get", "secrets", "-A", "-o", "json"]);
        // kubectl validates the List against /openapi/v2 (as protobuf).
        let replace = ["replace", "-f", "-"];
        cluster.kubectl.ok_with_input(&replace, &all);
        sealed_with("key2");

        // The old key dropped: every Secret still reads.
        let key2 = [("secrets", provider("aescbc", &[("key2", KEY2)]))];
        let only_key2 = write_config(cluster.dir.path(), "key2.yaml", &key2);
        cluster.restart(&only_key2);
        let passwords = cluster.kubectl.ok(&[
            "get",
            "secrets",
            "-A",
            "-o",
            "jsonpath={.items[*].data.password}",
        ]);
        let mut passwords: Vec<&str> = passwords.split_whitespace().collect();
        passwords.sort();
        // "a-secret", "b-secret", "c-secret" in base64.
        assert_eq!(passwords, ["YS1zZWNyZXQ=", "Yi1zZWNyZXQ=", "Yy1zZWNyZXQ="]);
        sealed_with("key2");

        // A value under the dropped key: a 500 naming it, on get and list,
        // whether it arrives while the server runs or is there at start.
        let stale = "/registry/secrets/default/stale";
        let secret = r#"{"kind":"Secret","apiVersion":"v1","metadata":{"name":"stale","namespace":"default"}}"#;
        let flags = [format!("--endpoints={endpoint}")];
        etcdctl_put_raw(
            &flags,
            stale,
            &kube_seal("aescbc", "key1", KEY1, stale, secret),
        );
        assert_unreadable(&cluster.kubectl, stale);
        cluster.restart(&only_key2);
        assert_unreadable(&cluster.kubectl, stale);
        let team = cluster.kubectl.ok(&[
            "get",
            "secret",
            "c",
            "-n",
            "team",
            "-o",
            "jsonpath={.data.password}",
        ]);
        assert_eq!(team, "Yy1zZWNyZXQ=", "other namespaces still list");
    }
}

fn assert_unreadable(kubectl: &Kubectl, key: &str) {
    let error = wait_for(WAIT, "the stale secret's error", || {
        let out = kubectl.run(&["get", "secret", "stale"]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (!out.status.success() && stderr.contains("InternalError")).then_some(stderr)
    });
    assert!(error.contains("\"key1\"") && error.contains(key), "{error}");
    let listed = kubectl.fails(&["get", "secrets"]);
    assert!(
        listed.contains("InternalError") && listed.contains("\"key1\""),
        "{listed}"
    );
}

#[test]
fn a_malformed_configuration_stops_start_up_naming_the_file() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let cases = [
        (
            "unknown.yaml",
            "  - aesxyz: {keys: []}\n".to_string(),
            "aesxyz",
        ),
        (
            "base64.yaml",
            provider("aescbc", &[("key1", "not base64!")]),
            "not valid base64",
        ),
        (
            "length.yaml",
            provider("aesgcm", &[("key1", "c2hvcnQ=")]),
            "16, 24 or 32 bytes",
        ),
        (
            "nokeys.yaml",
            "  - secretbox: {keys: []}\n".to_string(),
            "at least one key",
        ),
    ];
    for (file, providers, problem) in cases {
        let path = write_config(dir.path(), file, &[("secrets", providers)]);
        watchdog::waiting_for(format!("capstan-apiserver refusing {file}"));
        let output = Command::new(binary("capstan-apiserver"))
            .args(["--etcd-servers", "http://127.0.0.1:9", "--secure-port", "0"])
            .args(["--insecure-port", "1"])
            .arg("--encryption-provider-config")
            .arg(&path)
            .output()
            .expect("run capstan-apiserver");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{file} was accepted: {stderr}");
        let named = path.display().to_string();
        assert!(
            stderr.contains(&named) && stderr.contains(problem),
            "{file}: {stderr}"
        );
    }
}

#[test]
fn capstan_encrypts_secrets_by_default() {
    let capstan = Embedded::start();
    capstan.kubectl.ok(&[
        "create",
        "secret",
        "generic",
        "s1",
        "--from-literal=password=hunter2",
    ]);
    let pki = capstan.pki();
    let flags = [
        format!("--endpoints={}", capstan.store_url()),
        format!("--cacert={}", pki.store_ca().display()),
        format!("--cert={}", pki.store_client_cert().display()),
        format!("--key={}", pki.store_client_key().display()),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut args = flags.clone();
    args.extend(["get", "/registry/secrets/default/s1", "--print-value-only"]);
    let run = etcdctl(
        flags[0].trim_start_matches("--endpoints="),
        &args[1..],
        None,
    );
    assert!(run.ok, "{}", run.stderr);
    assert!(
        run.stdout.starts_with("k8s:enc:secretbox:v1:key1:"),
        "{:?}",
        run.stdout
    );
    assert!(!run.stdout.contains(PASSWORD_B64));
    let password = capstan
        .kubectl
        .ok(&["get", "secret", "s1", "-o", "jsonpath={.data.password}"]);
    assert_eq!(password, PASSWORD_B64);
    let config = capstan.dir.path().join("data/pki/encryption-config.yaml");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&config)
        .expect("the generated configuration")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // Config maps are not listed: plain.
    capstan
        .kubectl
        .ok(&["create", "configmap", "c1", "--from-literal=k=v"]);
    let mut args = flags.clone();
    args.extend([
        "get",
        "/registry/configmaps/default/c1",
        "--print-value-only",
    ]);
    let run = etcdctl(
        flags[0].trim_start_matches("--endpoints="),
        &args[1..],
        None,
    );
    assert!(run.stdout.starts_with('{'), "{:?}", run.stdout);
}
