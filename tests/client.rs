//! capstan-client against the real `capstan` binary: an informer fed by
//! kubectl's changes that survives the server being killed and
//! restarted; a connection from inline credentials that impersonates a
//! node; two leader electors, one killed, the other taking over once the
//! Lease lapses.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use capstan_client::connect::{ClientSettings, Connection, InlineCredentials};
use capstan_client::informer::{InformerEvent, InformerOptions, Informers};
use capstan_client::leader::{LeaderElectionConfig, LeaderElector};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};

use capstan_tests::apiserver::Kubectl;
use capstan_tests::store::http_get;
use capstan_tests::{binary, free_port, tls, watchdog};

/// `capstan` on fixed ports and a data folder, so it can be killed and
/// started again as the same server.
struct Capstan {
    child: Option<Child>,
    data: PathBuf,
    port: u16,
    store_port: u16,
    peer_port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
    _watchdog: watchdog::Watchdog,
}

impl Capstan {
    fn start() -> Capstan {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let data = dir.path().join("data");
        let port = free_port();
        let store_port = free_port();
        tls::register(port, &data.join("pki"));
        tls::register_store(store_port, &data.join("pki"));
        let mut capstan = Capstan {
            child: None,
            log: dir.path().join("capstan.log"),
            data,
            port,
            store_port,
            peer_port: free_port(),
            _dir: dir,
            _watchdog: watchdog::arm(),
        };
        capstan.spawn();
        capstan
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open the log");
        let child = Command::new(binary("capstan"))
            .arg("--data-dir")
            .arg(&self.data)
            .args(["--secure-port", &self.port.to_string()])
            .args(["--store-port", &self.store_port.to_string()])
            .args(["--peer-port", &self.peer_port.to_string()])
            .args(["--log-level", "warn"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start capstan");
        watchdog::track(child.id());
        self.child = Some(child);
        watchdog::waiting_for("capstan to become ready");
        let deadline = Instant::now() + Duration::from_secs(60);
        while http_get(self.port, "/readyz").is_none() {
            assert!(
                Instant::now() < deadline,
                "capstan not ready; log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            watchdog::untrack(child.id());
        }
    }

    fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    fn kubeconfig(&self) -> PathBuf {
        self.data.join("kubeconfig")
    }

    fn kubectl(&self) -> Kubectl {
        Kubectl {
            kubeconfig: self.kubeconfig(),
            cache_dir: self.data.with_file_name("kube-cache"),
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Capstan {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

async fn connect(capstan: &Capstan, component: &str) -> Connection {
    let settings = ClientSettings {
        kubeconfig: Some(capstan.kubeconfig()),
        ..ClientSettings::default()
    };
    Connection::from_settings(&settings, component)
        .await
        .expect("connect with capstan's kubeconfig")
}

/// Polls `check` until it holds (a generous bound against hangs, not a
/// speed requirement).
async fn eventually(what: &str, check: impl Fn() -> bool) {
    watchdog::waiting_for(what);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !check() {
        assert!(Instant::now() < deadline, "never saw {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_informer_follows_kubectl_across_a_server_restart() {
    let mut capstan = blocking(Capstan::start);
    let kubectl = capstan.kubectl();
    blocking(|| kubectl.ok(&["create", "namespace", "informed"]));
    let connection = connect(&capstan, "client-test").await;
    let informers = Informers::new(connection.client());
    let cms = informers.get_namespaced::<ConfigMap>(
        "informed",
        InformerOptions::default().labels("app=informed"),
    );
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = seen.clone();
    cms.add_handler(move |event: &InformerEvent<ConfigMap>| {
        let what = match event {
            InformerEvent::Added(_) => "ADDED",
            InformerEvent::Updated { .. } => "UPDATED",
            InformerEvent::Deleted(_) => "DELETED",
        };
        sink.lock().unwrap().push(format!("{what} {}", event.key()));
    });
    cms.wait_synced().await;
    let saw = |line: &str| {
        let seen = seen.clone();
        let line = line.to_string();
        move || seen.lock().unwrap().contains(&line)
    };
    let make = |name: &str| {
        blocking(|| {
            kubectl.ok(&[
                "create",
                "configmap",
                name,
                "-n",
                "informed",
                "--from-literal=k=v",
            ]);
            kubectl.ok(&["label", "configmap", name, "-n", "informed", "app=informed"]);
        })
    };

    make("one");
    make("two");
    eventually("one added", saw("ADDED informed/one")).await;
    blocking(|| {
        kubectl.ok(&[
            "annotate",
            "configmap",
            "one",
            "-n",
            "informed",
            "touched=yes",
        ])
    });
    eventually("one updated", saw("UPDATED informed/one")).await;
    blocking(|| kubectl.ok(&["delete", "configmap", "two", "-n", "informed"]));
    eventually("two deleted", saw("DELETED informed/two")).await;
    // Unlabelled: outside the informer's selector, never seen.
    blocking(|| kubectl.ok(&["create", "configmap", "unlabelled", "-n", "informed"]));

    // Kill the server; change things as soon as it is back, while the
    // informer is still reconnecting.
    blocking(|| capstan.restart());
    make("three");
    blocking(|| kubectl.ok(&["delete", "configmap", "one", "-n", "informed"]));
    eventually("three added after the restart", saw("ADDED informed/three")).await;
    eventually("one deleted after the restart", saw("DELETED informed/one")).await;

    let cached: BTreeSet<String> = cms.store().keys().into_iter().collect();
    let listed = blocking(|| {
        kubectl.ok(&[
            "get",
            "configmaps",
            "-n",
            "informed",
            "-l",
            "app=informed",
            "-o",
            "name",
        ])
    });
    let listed: BTreeSet<String> = listed
        .lines()
        .map(|l| format!("informed/{}", l.trim_start_matches("configmap/")))
        .collect();
    assert_eq!(cached, listed);
    assert_eq!(cached, BTreeSet::from(["informed/three".to_string()]));
    assert!(!seen
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("unlabelled")));
    let relisted = capstan_client::metrics::encode().lines().any(|l| {
        l.starts_with("informer_relists_total{resource=\"configmaps\"}") && !l.ends_with(" 0")
    });
    eprintln!(
        "informer after the restart: {}; events seen: {:?}",
        if relisted {
            "relisted"
        } else {
            "resumed its watch"
        },
        seen.lock().unwrap()
    );
    informers.shutdown();
}

#[tokio::test(flavor = "multi_thread")]
async fn inline_credentials_and_an_impersonated_node() {
    let capstan = blocking(Capstan::start);
    let pki = capstan_apiserver::pki::Pki::at(&capstan.data.join("pki"));
    let (cert_pem, key_pem) = tls::admin(&pki);
    let credentials = InlineCredentials {
        server: format!("https://127.0.0.1:{}", capstan.port),
        ca_pem: std::fs::read_to_string(pki.server_ca()).unwrap(),
        cert_pem,
        key_pem,
    };
    let connection =
        Connection::from_inline(&credentials, &ClientSettings::default(), "client-test")
            .await
            .expect("connect with inline credentials");
    let review = |client: kube::Client| async move {
        let api: Api<SelfSubjectReview> = Api::all(client);
        let review = api
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await
            .unwrap();
        review.status.unwrap().user_info.unwrap()
    };
    let own = review(connection.client()).await;
    assert_eq!(own.username.as_deref(), Some("system:admin"));
    let node = connection
        .impersonating("system:node:n1", &["system:nodes", "system:authenticated"])
        .unwrap();
    let as_node = review(node.clone()).await;
    assert_eq!(as_node.username.as_deref(), Some("system:node:n1"));
    assert!(as_node
        .groups
        .unwrap()
        .contains(&"system:nodes".to_string()));
    // Authorization sees the node, not the admin: a node may read
    // ConfigMaps but not write them (kube's system:node role), so a
    // create the admin could make is refused to it.
    let config_maps: Api<ConfigMap> = Api::namespaced(node, "default");
    let mut config_map = ConfigMap::default();
    config_map.metadata.name = Some("not-for-nodes".into());
    let refused = config_maps
        .create(&PostParams::default(), &config_map)
        .await
        .unwrap_err();
    match refused {
        kube::Error::Api(status) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("expected 403, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_elector_takes_over_when_the_leaders_task_dies() {
    let capstan = blocking(Capstan::start);
    let connection = connect(&capstan, "client-test").await;
    let config = || LeaderElectionConfig::new("kube-system", "client-test");
    let first = LeaderElector::new(connection.client(), config());
    let first_identity = first.identity().to_string();
    let leading = first.acquire().await;
    // The leader's work: it runs until leadership is lost or it is killed.
    let first_task = tokio::spawn(async move {
        leading.lost().await;
        "lost"
    });

    let second = LeaderElector::new(connection.client(), config());
    let second_identity = second.identity().to_string();
    let waiting = tokio::spawn(second.acquire());
    let leases: Api<Lease> = Api::namespaced(connection.client(), "kube-system");
    let holder = || async {
        let spec = leases.get("client-test").await.unwrap().spec.unwrap();
        (
            spec.holder_identity.unwrap_or_default(),
            spec.lease_transitions.unwrap_or(0),
        )
    };
    // While the first renews, the second waits, well past a lease duration.
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(
        !waiting.is_finished(),
        "the second took a lease that was being renewed"
    );
    assert!(
        !first_task.is_finished(),
        "the first lost its lease while renewing"
    );
    assert_eq!(holder().await, (first_identity, 0));

    let killed = Instant::now();
    first_task.abort();
    watchdog::waiting_for("the second elector to take over");
    let taken = waiting.await.expect("the second elector");
    let takeover = killed.elapsed();
    eprintln!(
        "takeover: {takeover:?} from killing the leader's task to the second elector leading"
    );
    assert!(taken.is_leading());
    assert_eq!(holder().await, (second_identity, 1));

    taken.release().await;
    assert_eq!(holder().await.0, "");
}
