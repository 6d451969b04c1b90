//! etcd's access control on the store, set up and used the way etcd's
//! documentation does it, with etcdctl 3.4 (`user add`, `role add`,
//! `role grant-permission --prefix`, `user grant-role`, `auth enable`,
//! `--user`) and etcd's gRPC API, on capstan-store and, with
//! `CAPSTAN_TEST_SERVER=etcd`, on etcd 3.4 itself: a user limited to a
//! prefix is refused outside it, a wrong password and anonymous clients
//! are refused, admin operations need root, tokens expire and JWTs go
//! stale when the rules change, a client certificate's common name is a
//! user, and the rules survive a restart and hold on every member.
//! `store_auth/apiserver.rs` runs the API server with its identity
//! limited to its prefix; `store_auth/trust_boundary.rs` attacks what etcd
//! has no equivalent for.

#[path = "store_auth/apiserver.rs"]
mod apiserver;
#[path = "store_auth/backups.rs"]
mod backups;
#[path = "store_auth/grpc.rs"]
mod grpc;
#[path = "store_auth/members.rs"]
mod members;
#[path = "store_auth/trust_boundary.rs"]
mod trust_boundary;

use std::time::Duration;

use capstan_tests::poll::wait_for;
use capstan_tests::store::{http_get, metric_value, on_reference_etcd};
use grpc::block_on;
use members::{As, Members, ROOT};

const DENIED: &str = "etcdserver: permission denied";
const NO_USER: &str = "etcdserver: user name is empty";
const BAD_LOGIN: &str = "etcdserver: authentication failed, invalid user ID or password";
const BAD_TOKEN: &str = "etcdserver: invalid auth token";
const OLD_RULES: &str = "etcdserver: revision of auth store is old";
const APP: As = As::User("app", "app-pw");

fn assert_says(text: &str, wanted: &str, what: &str) {
    assert!(
        text.contains(wanted),
        "{what}: expected {wanted:?} in {text:?}"
    );
}

#[test]
fn a_user_limited_to_a_prefix_is_refused_outside_it() {
    let store = Members::start(1, &[]);
    store.ok(0, As::Anonymous, &["put", "/other/secret", "s3cret"]);
    store.set_up_app_user_and_enable();

    store.ok(0, APP, &["put", "/app/a", "1"]);
    let value = store.ok(0, APP, &["get", "/app/a", "--print-value-only"]);
    assert_eq!(value.trim(), "1");
    store.ok(0, APP, &["get", "--prefix", "/app/"]);
    for outside in [
        vec!["put", "/other/x", "y"],
        vec!["get", "/other/secret"],
        vec!["get", "--prefix", "/"],
        vec!["get", "--from-key", "/app/"],
        vec!["del", "/other/secret"],
    ] {
        let err = store.refused(0, APP, &outside);
        assert_says(&err, DENIED, &format!("app's {outside:?}"));
    }
    // A transaction is checked whole: compares and both branches.
    let txn = "mod(\"/app/a\") > \"0\"\n\nput /other/x y\n\nput /app/b 2\n\n";
    let run = store.etcdctl_with(0, APP, &["txn"], Some(txn));
    assert!(!run.ok, "a txn writing outside the prefix: {}", run.stdout);
    assert_says(&run.stderr, DENIED, "a txn writing outside the prefix");

    let err = store.refused(0, As::Anonymous, &["get", "/app/a"]);
    assert_says(&err, NO_USER, "an anonymous read");
    let err = store.refused(0, As::User("app", "wrong"), &["get", "/app/a"]);
    assert_says(&err, BAD_LOGIN, "a wrong password");
    let err = store.refused(0, As::User("nobody", "app-pw"), &["get", "/app/a"]);
    assert_says(&err, BAD_LOGIN, "an unknown user");

    let secret = store.ok(0, ROOT, &["get", "/other/secret", "--print-value-only"]);
    assert_eq!(
        secret.trim(),
        "s3cret",
        "root reads everything; the del changed nothing"
    );
    let written = store.ok(0, ROOT, &["get", "--prefix", "/other/x", "--keys-only"]);
    assert!(
        written.trim().is_empty(),
        "refused writes changed nothing: {written}"
    );
    let written = store.ok(0, ROOT, &["get", "/app/b", "--keys-only"]);
    assert!(
        written.trim().is_empty(),
        "the refused txn wrote nothing: {written}"
    );
}

#[test]
fn a_watch_outside_the_prefix_is_canceled_at_once() {
    let store = Members::start(1, &[]);
    store.set_up_app_user_and_enable();
    let url = store.url(0);
    block_on(async {
        let token = grpc::authenticate(&url, "app", "app-pw").await.unwrap();
        let inside = grpc::watch_created(&url, "/app/", "/app0", Some(&token)).await;
        assert!(inside.created && !inside.canceled, "{inside:?}");
        let outside = grpc::watch_created(&url, "/", "0", Some(&token)).await;
        assert!(outside.created && outside.canceled, "{outside:?}");
        // etcd words the reason as Go prints a gRPC error.
        let reason = |code, text| format!("rpc error: code = {code} desc = {text}");
        assert_eq!(outside.cancel_reason, reason("PermissionDenied", DENIED));
        let anonymous = grpc::watch_created(&url, "/app/", "/app0", None).await;
        assert!(anonymous.canceled, "{anonymous:?}");
        assert_eq!(anonymous.cancel_reason, reason("InvalidArgument", NO_USER));
    });
}

#[test]
fn admin_operations_need_root() {
    let store = Members::start(1, &[]);
    store.set_up_app_user_and_enable();
    let file = store.dir.path().join("backup.db");
    let file = file.display().to_string();
    let admin_only = [
        vec!["snapshot", "save", &file],
        vec!["defrag"],
        vec!["user", "list"],
        vec!["user", "add", "intruder:pw"],
        vec!["role", "add", "intruders"],
        vec![
            "role",
            "grant-permission",
            "--prefix",
            "app-role",
            "readwrite",
            "/",
        ],
        vec!["user", "grant-role", "app", "root"],
        vec!["auth", "disable"],
    ];
    for args in &admin_only {
        let err = store.refused(0, APP, args);
        // etcd 3.4 sends a refused snapshot as "auth: permission denied".
        assert_says(&err, "permission denied", &format!("app's {args:?}"));
    }
    assert!(
        !std::path::Path::new(&file).exists(),
        "no snapshot was written"
    );
    // A user may read itself and its own roles.
    let me = store.ok(0, APP, &["user", "get", "app"]);
    assert_says(&me, "app-role", "app reads its own roles");
    store.ok(0, APP, &["role", "get", "app-role"]);
    let err = store.refused(0, APP, &["role", "get", "root"]);
    assert_says(&err, DENIED, "a role app does not hold");

    store.ok(0, ROOT, &["snapshot", "save", &file]);
    assert!(std::path::Path::new(&file).exists());
    store.ok(0, ROOT, &["defrag"]);
    let users = store.ok(0, ROOT, &["user", "list"]);
    assert_eq!(
        users.split_whitespace().collect::<Vec<_>>(),
        ["app", "root"]
    );
    if on_reference_etcd() {
        return; // etcd 3.4 lets any user change the membership and compact
    }
    let members = store.ok(0, APP, &["member", "list", "-w", "json"]);
    let members: serde_json::Value = serde_json::from_str(&members).unwrap();
    let id = format!("{:x}", members["members"][0]["ID"].as_u64().unwrap());
    for args in [vec!["member", "remove", &id], vec!["move-leader", &id]] {
        let err = store.refused(0, APP, &args);
        assert_says(&err, DENIED, &format!("app's {args:?}"));
    }
    let err = store.refused(0, As::Anonymous, &["compaction", "1"]);
    assert_says(&err, NO_USER, "an anonymous compaction");
}

#[test]
fn simple_tokens_expire_after_the_ttl_without_use() {
    let store = Members::start(1, &["--auth-token-ttl=2"]);
    store.set_up_app_user_and_enable();
    store.ok(0, ROOT, &["put", "/app/a", "1"]);
    let url = store.url(0);
    block_on(async {
        let token = grpc::authenticate(&url, "app", "app-pw").await.unwrap();
        let value = grpc::get(&url, "/app/a", Some(&token)).await.unwrap();
        assert_eq!(value.as_deref(), Some("1"));
        // The TTL is 2 s; the server sweeps once a second.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let expired = grpc::get(&url, "/app/a", Some(&token)).await.unwrap_err();
        assert_eq!(expired.code(), tonic::Code::Unauthenticated, "{expired:?}");
        assert_eq!(expired.message(), BAD_TOKEN);
        // Of an index already applied: etcd waits for a later one to be.
        let forged = format!("{}.1", "A".repeat(16));
        let forged = grpc::get(&url, "/app/a", Some(&forged)).await.unwrap_err();
        assert_eq!(forged.message(), BAD_TOKEN);
        let err = grpc::authenticate(&url, "app", "wrong").await.unwrap_err();
        assert_eq!(err.message(), BAD_LOGIN);
    });
}

#[test]
fn a_client_certificate_names_the_user() {
    let store = Members::start_tls(1, &[]);
    let apiserver = "kube-apiserver-etcd-client";
    let root = format!("root:{}", members::ROOT_PASSWORD);
    store.ok(0, As::Anonymous, &["user", "add", &root]);
    store.ok(
        0,
        As::Anonymous,
        &["user", "add", apiserver, "--no-password"],
    );
    store.ok(0, As::Anonymous, &["role", "add", "registry"]);
    let grant = [
        "role",
        "grant-permission",
        "--prefix",
        "registry",
        "readwrite",
        "/registry/",
    ];
    store.ok(0, As::Anonymous, &grant);
    store.ok(
        0,
        As::Anonymous,
        &["user", "grant-role", apiserver, "registry"],
    );
    store.ok(0, As::Anonymous, &["auth", "enable"]);

    let by_certificate = As::Certificate(apiserver);
    store.ok(0, by_certificate, &["put", "/registry/pods/a", "pod"]);
    let value = store.ok(
        0,
        by_certificate,
        &["get", "/registry/pods/a", "--print-value-only"],
    );
    assert_eq!(value.trim(), "pod");
    let err = store.refused(0, by_certificate, &["put", "/other", "x"]);
    assert_says(&err, DENIED, "the certificate's user outside its prefix");
    let err = store.refused(0, As::Certificate("stranger"), &["get", "/registry/pods/a"]);
    assert_says(&err, DENIED, "a certificate naming no user");
    // etcd 3.4 says so in other words than for a wrong password.
    let err = store.refused(
        0,
        As::User(apiserver, "guess"),
        &["get", "/registry/pods/a"],
    );
    assert_says(
        &err,
        "authentication failed",
        "a password login as a user without one",
    );
    // A certificate naming root is root.
    let file = store.dir.path().join("by-cert.db").display().to_string();
    store.ok(0, As::Certificate("root"), &["snapshot", "save", &file]);
}

#[test]
fn the_rules_survive_a_restart() {
    let mut store = Members::start(1, &[]);
    store.set_up_app_user_and_enable();
    store.restart(0);
    store.ok(0, APP, &["put", "/app/a", "after"]);
    let err = store.refused(0, APP, &["put", "/other", "x"]);
    assert_says(&err, DENIED, "app after a restart");
    let err = store.refused(0, As::Anonymous, &["get", "/app/a"]);
    assert_says(&err, NO_USER, "anonymous after a restart");
    let err = store.refused(0, As::User("app", "wrong"), &["get", "/app/a"]);
    assert_says(&err, BAD_LOGIN, "the password hash survived");
}

#[test]
fn every_member_enforces_the_same_rules() {
    let store = Members::start(3, &[]);
    store.set_up_app_user_and_enable();
    for i in 0..3 {
        store.ok(i, APP, &["put", &format!("/app/from-{i}"), "v"]);
        let err = store.refused(i, APP, &["put", "/other", "x"]);
        assert_says(&err, DENIED, &format!("app on member {i}"));
        let err = store.refused(i, As::Anonymous, &["get", "/app/from-0"]);
        assert_says(&err, NO_USER, &format!("anonymous on member {i}"));
    }
    // A token from one member works on the others: logins are replicated.
    let (first, third) = (store.url(0), store.url(2));
    block_on(async {
        let token = grpc::authenticate(&first, "app", "app-pw").await.unwrap();
        grpc::put(&third, "/app/token", "v", Some(&token))
            .await
            .unwrap();
        let err = grpc::put(&third, "/other", "v", Some(&token))
            .await
            .unwrap_err();
        assert_eq!(err.message(), DENIED);
    });
    // Lease requests a follower forwards to the leader go through.
    let follower = store.leader_index().map_or(1, |leader| (leader + 1) % 3);
    let granted = store.ok(follower, APP, &["lease", "grant", "600"]);
    let lease = granted
        .split_whitespace()
        .nth(1)
        .expect("a lease id")
        .to_string();
    store.ok(
        follower,
        APP,
        &["put", "/app/leased", "x", &format!("--lease={lease}")],
    );
    let live = store.ok(follower, APP, &["lease", "timetolive", &lease, "--keys"]);
    assert_says(&live, "/app/leased", "a lease read through a follower");
    store.ok(follower, APP, &["lease", "keep-alive", "--once", &lease]);
    // A change made through one member holds on another at once.
    let revoke = ["role", "revoke-permission", "app-role", "/app/", "--prefix"];
    store.ok(1, ROOT, &revoke);
    let err = store.refused(2, APP, &["put", "/app/late", "x"]);
    assert_says(&err, DENIED, "app after its permission was revoked");
    // Every member is at the same auth revision, and says so.
    let gauge = match on_reference_etcd() {
        true => "etcd_debugging_auth_revision",
        false => "capstan_store_debugging_auth_revision",
    };
    let revisions = || -> Vec<Option<f64>> {
        let scrape = |i: usize| http_get(store.members[i].client_port, "/metrics");
        (0..3).map(|i| metric_value(&scrape(i)?, gauge)).collect()
    };
    let agreed = wait_for(Duration::from_secs(10), "the same auth revision", || {
        let seen = revisions();
        seen.iter().all(|r| *r == seen[0]).then_some(seen[0])
    });
    assert!(agreed.is_some_and(|r| r >= 5.0), "{gauge}: {agreed:?}");
}

#[test]
fn jwt_tokens_are_signed_and_go_stale_when_the_rules_change() {
    let dir = tempfile::tempdir().unwrap();
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let (private, public) = (dir.path().join("jwt.key"), dir.path().join("jwt.pub"));
    std::fs::write(&private, key.serialize_pem()).unwrap();
    std::fs::write(&public, key.public_key_pem()).unwrap();
    let setting = format!(
        "--auth-token=jwt,pub-key={},priv-key={},sign-method=ES256,ttl=10m",
        public.display(),
        private.display()
    );
    let store = Members::start(1, &[&setting]);
    store.set_up_app_user_and_enable();
    store.ok(0, APP, &["put", "/app/a", "1"]);
    let url = store.url(0);
    block_on(async {
        let token = grpc::authenticate(&url, "app", "app-pw").await.unwrap();
        assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
        let value = grpc::get(&url, "/app/a", Some(&token)).await.unwrap();
        assert_eq!(value.as_deref(), Some("1"));
        let mut tampered = token.clone().into_bytes();
        let last = tampered.len() - 2;
        tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap();
        let err = grpc::get(&url, "/app/a", Some(&tampered))
            .await
            .unwrap_err();
        assert_eq!(err.message(), BAD_TOKEN);

        // Any change of the rules leaves older JWTs stale.
        let root = grpc::authenticate(&url, "root", members::ROOT_PASSWORD)
            .await
            .unwrap();
        store.ok(0, ROOT, &["role", "add", "another"]);
        for stale in [&token, &root] {
            let err = grpc::get(&url, "/app/a", Some(stale)).await.unwrap_err();
            assert_eq!(err.message(), OLD_RULES);
        }
        let fresh = grpc::authenticate(&url, "app", "app-pw").await.unwrap();
        assert!(grpc::get(&url, "/app/a", Some(&fresh)).await.is_ok());
    });
}
