//! Who each controller is to the API server. With
//! `--use-service-account-credentials` (kubeadm's setting) every
//! controller acts as its own service account,
//! `system:serviceaccount:kube-system:<name>`, so RBAC grants it only what
//! kube's `system:controller:<name>` role grants and audit names it; the
//! manager itself (`system:kube-controller-manager`) makes sure the
//! account exists and asks for a token through the TokenRequest API,
//! renewing it well before it expires. Otherwise every controller uses
//! the manager's own credentials. Informers always use the manager's
//! client: they are shared between controllers, as kube's are.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use capstan_client::connect::{https_transport, ClientSettings, Connection, Transport};
use http::{HeaderValue, Request};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::client::Body;
use parking_lot::{Mutex, RwLock};
use tokio_util::sync::CancellationToken;
use tower::util::BoxCloneSyncService;
use tower::ServiceBuilder;

use crate::error::{Error, Result};

/// Where the controllers' service accounts live.
pub const NAMESPACE: &str = "kube-system";

/// Lifetime asked for each token (kube's controller tokens last an hour).
const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);
/// A token is renewed once this share of its life has passed.
const RENEW_AT: f64 = 0.8;
/// Pause between failed renewals.
const RENEW_RETRY: Duration = Duration::from_secs(10);

/// The clients controllers use. Cheap to share.
pub struct Clients {
    root: Connection,
    settings: ClientSettings,
    /// The server's address and CA, without credentials: service-account
    /// clients add their bearer token to it. None: one identity for all.
    service_accounts: Option<kube::Config>,
    made: Mutex<HashMap<String, kube::Client>>,
    /// Ends the token renewals when the clients are dropped.
    renewals: CancellationToken,
}

impl Drop for Clients {
    fn drop(&mut self) {
        self.renewals.cancel();
    }
}

impl Clients {
    /// Every controller uses `root`'s identity.
    pub fn shared(root: Connection) -> Clients {
        Clients {
            root,
            settings: ClientSettings::default(),
            service_accounts: None,
            made: Mutex::new(HashMap::new()),
            renewals: CancellationToken::new(),
        }
    }

    /// Each controller gets its own service account's token; `server` is
    /// the kube-rs configuration `root` was made from.
    pub fn per_service_account(
        root: Connection,
        mut server: kube::Config,
        settings: ClientSettings,
    ) -> Clients {
        server.auth_info = Default::default();
        Clients {
            root,
            settings,
            service_accounts: Some(server),
            made: Mutex::new(HashMap::new()),
            renewals: CancellationToken::new(),
        }
    }

    /// The manager's own client (informers, leader election).
    pub fn root(&self) -> kube::Client {
        self.root.client()
    }

    /// The client controller `account` writes with (made once, its token
    /// renewed for as long as these clients live).
    pub async fn for_controller(&self, account: &str) -> Result<kube::Client> {
        let Some(server) = &self.service_accounts else {
            return Ok(self.root.client());
        };
        if let Some(client) = self.made.lock().get(account) {
            return Ok(client.clone());
        }
        let root = self.root.client();
        ensure_account(&root, account).await?;
        let (token, expires_in) = request_token(&root, account).await?;
        let cell = Arc::new(RwLock::new(token));
        let stop = self.renewals.child_token();
        tokio::spawn(renew(
            root,
            account.to_string(),
            cell.clone(),
            expires_in,
            stop,
        ));
        let transport = bearer(https_transport(server)?, cell);
        let component = format!("kube-controller-manager/{account}");
        let connection =
            Connection::over(transport, NAMESPACE.to_string(), &self.settings, &component)?;
        let client = connection.client();
        self.made.lock().insert(account.to_string(), client.clone());
        Ok(client)
    }
}

/// The user name a controller's service account authenticates as.
pub fn user_of(account: &str) -> String {
    format!("system:serviceaccount:{NAMESPACE}:{account}")
}

async fn ensure_account(root: &kube::Client, account: &str) -> Result<()> {
    let api: Api<ServiceAccount> = Api::namespaced(root.clone(), NAMESPACE);
    if api.get_opt(account).await?.is_some() {
        return Ok(());
    }
    let body = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(account.to_string()),
            namespace: Some(NAMESPACE.to_string()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    match api.create(&PostParams::default(), &body).await {
        Ok(_) => Ok(()),
        Err(err) => {
            let err = Error::from(err);
            if err.is_already_exists() {
                return Ok(());
            }
            Err(err)
        }
    }
}

/// A fresh token for `account` and how long it lives.
async fn request_token(root: &kube::Client, account: &str) -> Result<(String, Duration)> {
    let api: Api<ServiceAccount> = Api::namespaced(root.clone(), NAMESPACE);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            expiration_seconds: Some(TOKEN_LIFETIME.as_secs() as i64),
            bound_object_ref: None,
        },
        ..TokenRequest::default()
    };
    let answer = api
        .create_token_request(account, &PostParams::default(), &request)
        .await?;
    let status = answer
        .status
        .ok_or_else(|| Error::Invalid(format!("TokenRequest for {account} answered no token")))?;
    let now = k8s_openapi::chrono::Utc::now();
    let lives = (status.expiration_timestamp.0 - now)
        .to_std()
        .unwrap_or(TOKEN_LIFETIME);
    Ok((status.token, lives))
}

/// Keeps `cell` holding a live token: renews at 80% of its life, retries
/// failures every few seconds (the old token still works meanwhile).
async fn renew(
    root: kube::Client,
    account: String,
    cell: Arc<RwLock<String>>,
    mut lives: Duration,
    stop: CancellationToken,
) {
    let mut wait = lives.mul_f64(RENEW_AT);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        match request_token(&root, &account).await {
            Ok((token, fresh)) => {
                *cell.write() = token;
                lives = fresh;
                wait = lives.mul_f64(RENEW_AT);
                tracing::debug!(%account, "controller token renewed");
            }
            Err(err) => {
                tracing::warn!(%account, %err, "renewing the controller's token failed; retrying");
                wait = RENEW_RETRY;
            }
        }
    }
}

/// `transport` with `Authorization: Bearer <token>` from `cell` on every request.
fn bearer(transport: Transport, cell: Arc<RwLock<String>>) -> Transport {
    let service = ServiceBuilder::new()
        .map_request(move |mut request: Request<Body>| {
            let value = format!("Bearer {}", cell.read());
            if let Ok(mut value) = HeaderValue::from_str(&value) {
                value.set_sensitive(true);
                request
                    .headers_mut()
                    .insert(http::header::AUTHORIZATION, value);
            }
            request
        })
        .service(transport);
    BoxCloneSyncService::new(service)
}
