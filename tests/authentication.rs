//! Authentication as a person meets it: the admin kubeconfig, anonymous
//! and bad credentials, client certificates of the client CA and others,
//! service-account tokens from `kubectl create token` (bound, expired,
//! for another audience, of a deleted account), impersonation, the
//! issuer's discovery documents, TokenReview, and kube-rs with a
//! certificate and with a token. Authorization is AlwaysAllow here.

use std::time::Duration;

use capstan_tests::apiserver::{ApiCluster, Http, Kubectl};
use capstan_tests::poll::wait_for;
use capstan_tests::tls::{self, Identity};
use serde_json::{json, Value};
use time::OffsetDateTime;

const WHOAMI: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
const CMS: &str = "/api/v1/namespaces/default/configmaps";

/// The user name the server sees for `identity`, or the HTTP code.
fn whoami(port: u16, identity: &Identity) -> Result<String, (u16, Value)> {
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let (code, body) = Http::connect_as(port, identity).request("POST", WHOAMI, Some(&review));
    match code {
        201 => Ok(body["status"]["userInfo"]["username"]
            .as_str()
            .unwrap_or("")
            .to_string()),
        _ => Err((code, body)),
    }
}

#[track_caller]
fn assert_unauthorized(result: Result<String, (u16, Value)>) {
    let (code, status) = result.expect_err("should be refused");
    assert_eq!(code, 401, "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "Unauthorized");
}

fn client_certificate(
    cluster: &ApiCluster,
    user: &str,
    from: OffsetDateTime,
    days: i64,
) -> Identity {
    let pki = tls::pki_of(cluster.port).expect("a TLS server");
    let ca = pki.client_authority().expect("the client CA");
    let issued = ca
        .issue_client(user, Some("dev"), from, time::Duration::days(days))
        .expect("a client certificate");
    Identity::Certificate {
        cert: issued.certificate,
        key: issued.key,
    }
}

#[test]
fn anonymous_certificates_and_bad_credentials() {
    let cluster = ApiCluster::start();
    let port = cluster.port;
    // No credentials: anonymous, who RBAC (the default) lets read nothing
    // but health, version and the like; the 403 names who asked.
    let (code, status) = whoami(port, &Identity::Anonymous).expect_err("anonymous is refused");
    assert_eq!(code, 403, "{status}");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(message.contains("User \"system:anonymous\""), "{status}");
    let (code, _) = Http::connect_as(port, &Identity::Anonymous).get(CMS);
    assert_eq!(code, 403);
    // The admin kubeconfig is the admin, in system:masters.
    let whoami_admin = cluster.kubectl.ok(&["auth", "whoami"]);
    assert!(whoami_admin.contains("system:admin"), "{whoami_admin}");
    assert!(whoami_admin.contains("system:masters"), "{whoami_admin}");
    // A certificate of the client CA names its user and group.
    let an_hour_ago = OffsetDateTime::now_utc() - time::Duration::hours(1);
    let jane = client_certificate(&cluster, "jane", an_hour_ago, 1);
    let dir = cluster.dir.path();
    let as_jane = Kubectl::as_identity(dir, port, &jane, "jane.kubeconfig");
    let who = as_jane.ok(&["auth", "whoami", "-o", "jsonpath={.status.userInfo.groups}"]);
    assert_eq!(who, r#"["dev","system:authenticated"]"#);
    // Bad credentials are a 401 Status, never anonymous.
    assert_unauthorized(whoami(port, &Identity::Token("not-a-token".into())));
    let expired = client_certificate(&cluster, "jane", an_hour_ago - time::Duration::days(3), 1);
    assert_unauthorized(whoami(port, &expired));
    let stranger = capstan_apiserver::pki::Authority::generate("capstan-client-ca").unwrap();
    let issued = stranger
        .issue_client(
            "system:admin",
            Some("system:masters"),
            an_hour_ago,
            time::Duration::days(1),
        )
        .unwrap();
    let untrusted = Identity::Certificate {
        cert: issued.certificate,
        key: issued.key,
    };
    assert_unauthorized(whoami(port, &untrusted));
    let refused = Kubectl::as_identity(dir, port, &untrusted, "untrusted.kubeconfig")
        .fails(&["get", "configmaps"]);
    // kubectl's two words for a 401 (discovery or the request itself).
    let unauthorized = [
        "Unauthorized",
        "asked for the client to provide credentials",
    ];
    assert!(
        unauthorized.iter().any(|w| refused.contains(w)),
        "{refused}"
    );
    // Impersonation (allowed by AlwaysAllow) acts as the named user.
    let alice = cluster.kubectl.ok(&[
        "auth",
        "whoami",
        "--as",
        "alice",
        "--as-group",
        "ops",
        "-o",
        "jsonpath={.status.userInfo}",
    ]);
    assert_eq!(
        alice,
        r#"{"groups":["ops","system:authenticated"],"username":"alice"}"#
    );
}

/// A token of `robot` from kubectl, with `extra` flags.
fn token(kubectl: &Kubectl, extra: &[&str]) -> String {
    let mut args = vec!["create", "token", "robot"];
    args.extend_from_slice(extra);
    kubectl.ok(&args).trim().to_string()
}

fn wait_refused(port: u16, token: &str, what: &str) {
    let identity = Identity::Token(token.to_string());
    let (code, status) = wait_for(Duration::from_secs(20), what, || {
        whoami(port, &identity).err()
    });
    assert_eq!(code, 401, "{what}: {status}");
}

#[test]
fn service_account_tokens_from_kubectl() {
    let cluster = ApiCluster::start();
    let (port, kubectl) = (cluster.port, &cluster.kubectl);
    kubectl.ok(&["create", "serviceaccount", "robot"]);
    let robot = "system:serviceaccount:default:robot";
    let plain = token(kubectl, &["--duration", "20m"]);
    assert_eq!(
        whoami(port, &Identity::Token(plain.clone())).unwrap(),
        robot
    );
    let as_robot = Kubectl::as_identity(
        cluster.dir.path(),
        port,
        &Identity::Token(plain.clone()),
        "robot.kubeconfig",
    );
    // Authenticated, but RBAC gives a new service account nothing until
    // it is bound to a role, and then only in that namespace.
    let denied = as_robot.fails(&["get", "configmaps", "-o", "name"]);
    assert!(
        denied.contains(&format!(
            "User \"{robot}\" cannot list resource \"configmaps\""
        )),
        "{denied}"
    );
    kubectl.ok(&[
        "create",
        "rolebinding",
        "robot-edit",
        "--clusterrole=edit",
        "--serviceaccount=default:robot",
    ]);
    let listed = capstan_tests::poll::wait_for(
        std::time::Duration::from_secs(20),
        "the binding to take effect",
        || {
            let output = as_robot.run(&["get", "configmaps", "-o", "name"]);
            let listed = String::from_utf8_lossy(&output.stdout).to_string();
            output.status.success().then_some(listed)
        },
    );
    assert_eq!(listed, "");
    let elsewhere = as_robot.fails(&["get", "configmaps", "-n", "kube-system"]);
    assert!(elsewhere.contains("forbidden"), "{elsewhere}");
    let short = kubectl.fails(&["create", "token", "robot", "--duration", "1m"]);
    assert!(
        short.contains("may not specify a duration less than 10 minutes"),
        "{short}"
    );
    // Another audience than the server's is refused.
    let elsewhere = token(kubectl, &["--audience", "https://vault.example"]);
    assert_unauthorized(whoami(port, &Identity::Token(elsewhere.clone())));
    // TokenReview says the same.
    let review = |token: &str, audiences: Value| {
        let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                          "spec": {"token": token, "audiences": audiences}});
        Http::connect(port).request(
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            Some(&body),
        )
    };
    let (code, reviewed) = review(&elsewhere, json!(["https://vault.example"]));
    assert_eq!(code, 201, "{reviewed}");
    assert_eq!(reviewed["status"]["authenticated"], true, "{reviewed}");
    assert_eq!(reviewed["status"]["user"]["username"], robot);
    assert_eq!(
        reviewed["status"]["audiences"],
        json!(["https://vault.example"])
    );
    assert_eq!(
        review(&elsewhere, json!([])).1["status"]["authenticated"],
        false
    );
    // A token bound to a pod lives as long as the pod.
    kubectl.ok(&["run", "worker", "--image=busybox"]);
    let bound = token(
        kubectl,
        &[
            "--bound-object-kind",
            "Pod",
            "--bound-object-name",
            "worker",
        ],
    );
    let as_bound = Kubectl::as_identity(
        cluster.dir.path(),
        port,
        &Identity::Token(bound.clone()),
        "bound.kubeconfig",
    );
    let extra = as_bound.ok(&["auth", "whoami", "-o", "jsonpath={.status.userInfo.extra}"]);
    assert!(
        extra.contains(r#""authentication.kubernetes.io/pod-name":["worker"]"#),
        "{extra}"
    );
    kubectl.ok(&["delete", "pod", "worker"]);
    wait_refused(port, &bound, "the token of the deleted pod to be refused");
    assert_eq!(
        whoami(port, &Identity::Token(plain.clone())).unwrap(),
        robot
    );
    // A token the server signed, but expired, is refused; the same token
    // valid now is not (so only the expiry refuses it).
    let uid = kubectl.ok(&["get", "sa", "robot", "-o", "jsonpath={.metadata.uid}"]);
    let pki = tls::pki_of(port).unwrap();
    let forged = |issued: i64| forge(&pki.service_account_key(), &uid, issued);
    let now = OffsetDateTime::now_utc().unix_timestamp();
    assert_eq!(whoami(port, &Identity::Token(forged(now))).unwrap(), robot);
    assert_unauthorized(whoami(port, &Identity::Token(forged(now - 7200))));
    // Deleting the account invalidates its tokens.
    kubectl.ok(&["delete", "serviceaccount", "robot"]);
    wait_refused(
        port,
        &plain,
        "the token of the deleted account to be refused",
    );
}

/// A token for `default/robot` signed with the server's own key, issued
/// at `issued` (seconds since the epoch) for ten minutes.
fn forge(key: &std::path::Path, uid: &str, issued: i64) -> String {
    let claims = json!({
        "iss": capstan_apiserver::config::DEFAULT_ISSUER,
        "sub": "system:serviceaccount:default:robot",
        "aud": [capstan_apiserver::config::DEFAULT_ISSUER],
        "iat": issued, "nbf": issued, "exp": issued + 600,
        "kubernetes.io": {"namespace": "default", "serviceaccount": {"name": "robot", "uid": uid}},
    });
    let pem = std::fs::read(key).expect("the signing key");
    let key = jsonwebtoken::EncodingKey::from_ec_pem(&pem).expect("an EC key");
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256),
        &claims,
        &key,
    )
    .expect("a signed token")
}

#[test]
fn issuer_discovery_documents_verify_the_servers_tokens() {
    let cluster = ApiCluster::start();
    cluster.kubectl.ok(&["create", "serviceaccount", "robot"]);
    let token = token(&cluster.kubectl, &[]);
    // The bootstrap policy shows the documents to service accounts.
    let mut http = Http::connect_as(cluster.port, &Identity::Token(token.clone()));
    let (code, discovery) = http.get("/.well-known/openid-configuration");
    assert_eq!(code, 200);
    assert_eq!(
        discovery["issuer"],
        capstan_apiserver::config::DEFAULT_ISSUER
    );
    let (code, jwks) = http.get("/openid/v1/jwks");
    assert_eq!(code, 200);
    let set: jsonwebtoken::jwk::JwkSet = serde_json::from_value(jwks).expect("a JWK set");
    let kid = jsonwebtoken::decode_header(&token)
        .unwrap()
        .kid
        .expect("a kid");
    let jwk = set.find(&kid).expect("the token's key in the JWKS");
    let key = jsonwebtoken::DecodingKey::from_jwk(jwk).unwrap();
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    validation.set_audience(&[capstan_apiserver::config::DEFAULT_ISSUER]);
    let claims =
        jsonwebtoken::decode::<Value>(&token, &key, &validation).expect("verified by the JWKS");
    assert_eq!(claims.claims["sub"], "system:serviceaccount:default:robot");
}

#[tokio::test(flavor = "multi_thread")]
async fn kube_rs_with_a_client_certificate_and_with_a_token() {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    use kube::api::{Api, PostParams};
    let cluster = tokio::task::block_in_place(ApiCluster::start);
    // Through the written kubeconfig, as a program would load it.
    let kubeconfig = kube::config::Kubeconfig::read_from(&cluster.kubectl.kubeconfig).unwrap();
    let options = kube::config::KubeConfigOptions::default();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap();
    let admin = kube::Client::try_from(config).unwrap();
    let review: SelfSubjectReview = serde_json::from_value(json!({})).unwrap();
    let reviews = Api::<SelfSubjectReview>::all(admin);
    let answer = reviews
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    let user = answer.status.unwrap().user_info.unwrap();
    assert_eq!(user.username.as_deref(), Some("system:admin"));
    let token = tokio::task::block_in_place(|| {
        cluster.kubectl.ok(&["create", "serviceaccount", "robot"]);
        token(&cluster.kubectl, &[])
    });
    let config = tls::kube_config_as(cluster.port, &Identity::Token(token));
    let robot = Api::<SelfSubjectReview>::all(kube::Client::try_from(config).unwrap());
    let answer = robot.create(&PostParams::default(), &review).await.unwrap();
    let user = answer.status.unwrap().user_info.unwrap();
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:default:robot")
    );
    let bad = tls::kube_config_as(cluster.port, &Identity::Token("nonsense".into()));
    let refused = Api::<SelfSubjectReview>::all(kube::Client::try_from(bad).unwrap())
        .create(&PostParams::default(), &review)
        .await
        .expect_err("a bad token is refused");
    assert!(
        matches!(refused, kube::Error::Api(ref s) if s.code == 401),
        "{refused:?}"
    );
}

#[test]
fn the_python_client_works_with_the_written_kubeconfig() {
    let python = capstan_tests::python::python_with_kubernetes();
    let capstan = capstan_tests::apiserver::Embedded::start();
    let script = "import sys\n\
from kubernetes import client, config\n\
config.load_kube_config(config_file=sys.argv[1])\n\
names = sorted(n.metadata.name for n in client.CoreV1Api().list_namespace().items)\n\
review = client.AuthenticationV1Api().create_self_subject_review(client.V1SelfSubjectReview())\n\
print(','.join(names))\n\
print(review.status.user_info.username, ','.join(review.status.user_info.groups))\n";
    let output = std::process::Command::new(python)
        .args(["-c", script])
        .arg(&capstan.kubectl.kubeconfig)
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        stdout,
        "default,kube-node-lease,kube-public,kube-system\n\
         system:admin system:masters,system:authenticated\n"
    );
}
