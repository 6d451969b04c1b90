//! RBAC as a person meets it, with kubectl 1.32 against `capstan-apiserver
//! --authorization-mode=RBAC --token-auth-file=...` on `capstan-store`:
//! an admin token in `system:masters`, plain users alice and bob, and
//! anonymous requests.

use std::path::Path;
use std::time::Duration;

use capstan_tests::apiserver::{ApiServer, Backend, StoreBackend};
use capstan_tests::http::Connection;
use capstan_tests::kubectl::Kubectl;
use capstan_tests::poll::wait_for;
use capstan_tests::tls::Identity;

/// A guard against hanging while a grant reaches the index.
const PATIENCE: Duration = Duration::from_secs(20);

const TOKENS: &str = "admin-token,admin,1,\"system:masters\"\n\
alice-token,alice,2\n\
bob-token,bob,3,\"dev\"\n";

/// kubectl as the holder of `token` (anonymous without one), over HTTPS
/// with the server's CA.
fn kubectl_as(dir: &Path, port: u16, who: &str, token: Option<&str>) -> Kubectl {
    let identity = match token {
        Some(token) => Identity::Token(token.to_string()),
        None => Identity::Anonymous,
    };
    Kubectl::as_identity(dir, port, &identity, &format!("kubeconfig-{who}"))
}

struct Cluster {
    admin: Kubectl,
    alice: Kubectl,
    bob: Kubectl,
    port: u16,
    // Drop order: the API server, then the store, then the folder.
    _api: ApiServer,
    _store: StoreBackend,
    _dir: tempfile::TempDir,
}

fn start(backend: Backend) -> Cluster {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, TOKENS).expect("write the token file");
    let store = StoreBackend::start(backend, &dir.path().join("store"));
    let flags = [
        "--authorization-mode=RBAC",
        "--token-auth-file",
        tokens.to_str().expect("a UTF-8 path"),
    ];
    let api = ApiServer::start_with(&[store.url()], dir.path(), "apiserver", &flags);
    let port = api.port;
    let kubectl = |who, token| kubectl_as(dir.path(), port, who, token);
    Cluster {
        admin: kubectl("admin", Some("admin-token")),
        alice: kubectl("alice", Some("alice-token")),
        bob: kubectl("bob", Some("bob-token")),
        port,
        _api: api,
        _store: store,
        _dir: dir,
    }
}

/// An anonymous GET: its status and body.
fn anonymous_get(port: u16, path: &str) -> (u16, String) {
    let mut connection =
        Connection::connect_as(port, &Identity::Anonymous).unwrap_or_else(|e| panic!("{e}"));
    let response = connection
        .send("GET", path, &[], &[])
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    (
        response.status,
        String::from_utf8_lossy(&response.body).into_owned(),
    )
}

/// stderr of a kubectl run that fails, once it does.
fn refused(kubectl: &Kubectl, args: &[&str]) -> String {
    kubectl.fails(args)
}

/// Runs `args` until it succeeds (a new grant reaches the authorizer's
/// index through a watch, a moment after the write is acknowledged).
fn eventually_ok(kubectl: &Kubectl, args: &[&str]) -> String {
    wait_for(PATIENCE, &format!("kubectl {args:?} to be allowed"), || {
        let output = kubectl.run(args);
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).to_string())
    })
}

#[test]
fn alice_is_refused_until_bound_to_edit_on_capstan_store() {
    alice_is_refused_until_bound_to_edit_and_then_only_in_her_namespace(Backend::Capstan);
}

#[test]
fn alice_is_refused_until_bound_to_edit_on_etcd() {
    alice_is_refused_until_bound_to_edit_and_then_only_in_her_namespace(Backend::Etcd);
}

fn alice_is_refused_until_bound_to_edit_and_then_only_in_her_namespace(backend: Backend) {
    let c = start(backend);
    c.admin.ok(&["create", "namespace", "team"]);
    c.admin.ok(&["create", "namespace", "other"]);
    let denied = refused(&c.alice, &["-n", "team", "get", "configmaps"]);
    assert!(
        denied.contains(
            "Error from server (Forbidden): configmaps is forbidden: User \"alice\" cannot list \
             resource \"configmaps\" in API group \"\" in the namespace \"team\""
        ),
        "{denied}"
    );
    let cluster = refused(&c.alice, &["get", "namespaces"]);
    assert!(
        cluster.contains(
            "namespaces is forbidden: User \"alice\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
        ),
        "{cluster}"
    );
    c.admin.ok(&[
        "-n",
        "team",
        "create",
        "rolebinding",
        "alice-edit",
        "--clusterrole=edit",
        "--user=alice",
    ]);
    eventually_ok(
        &c.alice,
        &[
            "-n",
            "team",
            "create",
            "configmap",
            "settings",
            "--from-literal=mode=blue",
        ],
    );
    let listed = c
        .alice
        .ok(&["-n", "team", "get", "configmaps", "-o", "name"]);
    assert!(listed.contains("configmap/settings"), "{listed}");
    c.alice.ok(&[
        "-n",
        "team",
        "create",
        "deployment",
        "web",
        "--image=nginx:1.25",
    ]);
    c.alice
        .ok(&["-n", "team", "scale", "deployment", "web", "--replicas=3"]);
    let elsewhere = refused(&c.alice, &["-n", "other", "create", "configmap", "x"]);
    assert!(
        elsewhere.contains("User \"alice\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"other\""),
        "{elsewhere}"
    );
    // `edit` does not grant RBAC writes at all.
    let bind = refused(
        &c.alice,
        &[
            "-n",
            "team",
            "create",
            "rolebinding",
            "mine",
            "--clusterrole=cluster-admin",
            "--user=alice",
        ],
    );
    assert!(
        bind.contains("rolebindings.rbac.authorization.k8s.io is forbidden: User \"alice\" cannot create resource \"rolebindings\" in API group \"rbac.authorization.k8s.io\" in the namespace \"team\""),
        "{bind}"
    );
    // `can-i` gives the same answers.
    assert_eq!(
        c.alice
            .ok(&["auth", "can-i", "create", "configmaps", "-n", "team"])
            .trim(),
        "yes"
    );
    let no = c
        .alice
        .run(&["auth", "can-i", "create", "configmaps", "-n", "other"]);
    assert_eq!(String::from_utf8_lossy(&no.stdout).trim(), "no");
    assert!(!no.status.success());
    let as_alice = c.admin.ok(&[
        "auth", "can-i", "delete", "secrets", "-n", "team", "--as", "alice",
    ]);
    assert_eq!(as_alice.trim(), "yes");
    let as_alice = c
        .admin
        .run(&["auth", "can-i", "get", "nodes", "--as", "alice"]);
    assert_eq!(String::from_utf8_lossy(&as_alice.stdout).trim(), "no");
}

#[test]
fn escalation_is_refused_unless_held_and_anonymous_reads_only_public_paths() {
    let c = start(Backend::Capstan);
    c.admin.ok(&["create", "namespace", "team2"]);
    c.admin.ok(&[
        "-n",
        "team2",
        "create",
        "rolebinding",
        "alice-admin",
        "--clusterrole=admin",
        "--user=alice",
    ]);
    // What alice holds she may grant...
    eventually_ok(
        &c.alice,
        &[
            "-n",
            "team2",
            "create",
            "role",
            "reader",
            "--verb=get,list",
            "--resource=configmaps",
        ],
    );
    c.alice.ok(&[
        "-n",
        "team2",
        "create",
        "rolebinding",
        "bob-view",
        "--clusterrole=view",
        "--user=bob",
    ]);
    // ...and nothing more.
    let binding = refused(
        &c.alice,
        &[
            "-n",
            "team2",
            "create",
            "rolebinding",
            "root",
            "--clusterrole=cluster-admin",
            "--user=alice",
        ],
    );
    assert!(
        binding.contains(
            "rolebindings.rbac.authorization.k8s.io \"root\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}"
        ),
        "{binding}"
    );
    let role = refused(
        &c.alice,
        &[
            "-n",
            "team2",
            "create",
            "role",
            "nodes",
            "--verb=create",
            "--resource=nodes",
        ],
    );
    assert!(
        role.contains("roles.rbac.authorization.k8s.io \"nodes\" is forbidden: user \"alice\"")
            && role.contains("{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"create\"]}"),
        "{role}"
    );
    // The admin may grant anything.
    c.admin.ok(&[
        "-n",
        "team2",
        "create",
        "role",
        "nodes",
        "--verb=create",
        "--resource=nodes",
    ]);

    // bob, with `view`, lists pods but neither lists nor watches Secrets.
    eventually_ok(&c.bob, &["-n", "team2", "get", "pods"]);
    let list = refused(&c.bob, &["-n", "team2", "get", "secrets"]);
    assert!(
        list.contains("User \"bob\" cannot list resource \"secrets\""),
        "{list}"
    );
    let watch = refused(
        &c.bob,
        &["get", "--raw", "/api/v1/namespaces/team2/secrets?watch=1"],
    );
    assert!(
        watch.contains("secrets is forbidden: User \"bob\" cannot watch resource \"secrets\" in API group \"\" in the namespace \"team2\""),
        "{watch}"
    );
    // Impersonation needs `impersonate`.
    let impersonate = refused(&c.bob, &["-n", "team2", "get", "pods", "--as", "alice"]);
    assert!(
        impersonate.contains("users \"alice\" is forbidden: User \"bob\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"),
        "{impersonate}"
    );
    c.admin
        .ok(&["-n", "team2", "get", "secrets", "--as", "alice"]);

    // Anonymous (over HTTPS kubectl would prompt for a password, so a raw
    // client asks): health and version, nothing else. Discovery is for
    // authenticated users only, as in kube-apiserver since 1.14.
    for path in ["/healthz", "/readyz", "/livez", "/version"] {
        let (code, body) = anonymous_get(c.port, path);
        assert_eq!(code, 200, "{path}: {body}");
    }
    for (path, words) in [
        (
            "/metrics",
            "User \"system:anonymous\" cannot get path \"/metrics\"",
        ),
        ("/api", "User \"system:anonymous\" cannot get path \"/api\""),
        (
            "/api/v1/namespaces/team2/pods",
            "pods is forbidden: User \"system:anonymous\" cannot list resource \"pods\"",
        ),
    ] {
        let (code, body) = anonymous_get(c.port, path);
        assert_eq!(code, 403, "{path}: {body}");
        let status: serde_json::Value = serde_json::from_str(&body).expect("a Status");
        let message = status["message"].as_str().unwrap_or_default();
        assert!(message.contains(words), "{path}: {body}");
    }
    // An unknown token is not anyone.
    let stranger = kubectl_as(c._dir.path(), c.port, "stranger", Some("no-such-token"));
    let unknown = refused(&stranger, &["get", "--raw", "/version"]);
    assert!(unknown.contains("Unauthorized"), "{unknown}");
}

#[test]
fn can_i_list_shows_the_rules_a_user_holds() {
    let c = start(Backend::Capstan);
    c.admin.ok(&["create", "namespace", "team3"]);
    c.admin.ok(&[
        "-n",
        "team3",
        "create",
        "role",
        "cm",
        "--verb=get,update",
        "--resource=configmaps",
        "--resource-name=app",
    ]);
    c.admin.ok(&[
        "-n",
        "team3",
        "create",
        "rolebinding",
        "bob-cm",
        "--role=cm",
        "--user=bob",
    ]);
    let listed = eventually_ok(&c.bob, &["auth", "can-i", "--list", "-n", "team3"]);
    let header = listed.lines().next().unwrap_or("");
    for column in ["Resources", "Non-Resource URLs", "Resource Names", "Verbs"] {
        assert!(header.contains(column), "{listed}");
    }
    let row = |name: &str| {
        listed
            .lines()
            .find(|l| l.starts_with(name))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    assert_eq!(
        row("configmaps").as_deref(),
        Some("configmaps [] [app] [get update]"),
        "{listed}"
    );
    assert_eq!(
        row("selfsubjectaccessreviews.authorization.k8s.io").as_deref(),
        Some("selfsubjectaccessreviews.authorization.k8s.io [] [] [create]"),
        "{listed}"
    );
    assert!(
        listed
            .lines()
            .any(|l| l.trim_start().starts_with("[/api/*]") && l.contains("[get]")),
        "{listed}"
    );
    assert_eq!(
        c.bob
            .ok(&["auth", "can-i", "update", "configmaps/app", "-n", "team3"])
            .trim(),
        "yes"
    );
    let other = c
        .bob
        .run(&["auth", "can-i", "update", "configmaps/db", "-n", "team3"]);
    assert_eq!(String::from_utf8_lossy(&other.stdout).trim(), "no");
    let everything = c.admin.ok(&["auth", "can-i", "--list"]);
    assert!(
        everything
            .lines()
            .any(|l| l.starts_with("*.*") && l.contains("[*]")),
        "{everything}"
    );
}

/// Two API servers starting at once on an empty store both reconcile the
/// bootstrap policy (the one that loses a create or update race reads
/// again) and both serve; before, the loser stopped with "already exists".
#[test]
fn two_api_servers_starting_at_once_both_serve() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = StoreBackend::start(Backend::Capstan, &dir.path().join("store"));
    let url = store.url();
    let homes = ["first", "second"].map(|name| dir.path().join(name));
    let servers: Vec<(ApiServer, &Path)> = std::thread::scope(|scope| {
        let starts: Vec<_> = homes
            .iter()
            .map(|home| {
                std::fs::create_dir_all(home).expect("a home for each server");
                let url = &url;
                scope.spawn(move || (ApiServer::start(url, home, "apiserver"), home.as_path()))
            })
            .collect();
        starts
            .into_iter()
            .map(|start| start.join().expect("an API server started"))
            .collect()
    });
    for (server, home) in &servers {
        let admin = Kubectl::new(home, server.port);
        admin.ok(&["get", "clusterrole", "cluster-admin"]);
        admin.ok(&["get", "clusterrolebinding", "system:discovery"]);
    }
}
