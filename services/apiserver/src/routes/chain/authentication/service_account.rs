//! Service-account tokens: a JWT this server's issuer signed, for one of
//! the request's audiences, within its validity, whose service account
//! still exists with the uid in the token and, for a bound token, whose
//! Pod or Secret still exists with its uid (kube-apiserver's
//! service-account authenticator with its lookup of live objects). Tokens
//! of other issuers are left to other authenticators.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::{Authenticated, Authenticator, Credentials, Outcome};
use crate::auth::{self, UserInfo};
use crate::error::ApiError;
use crate::registry::flow::Part;
use crate::registry::{requests, Catalog};
use crate::serviceaccount::claims::{Binding, Claims};
use crate::serviceaccount::{Issuer, TokenError};

pub struct ServiceAccounts {
    pub issuer: Arc<Issuer>,
    pub catalog: Arc<Catalog>,
}

impl Authenticator for ServiceAccounts {
    fn authenticate<'a>(&'a self, credentials: &'a Credentials<'a>) -> Outcome<'a> {
        Box::pin(async move {
            let Some(token) = credentials.bearer() else {
                return Ok(None);
            };
            let claims = match self.issuer.verify(token, credentials.audiences) {
                Err(TokenError::Foreign) => return Ok(None),
                Err(why) => return refuse(why.to_string()),
                Ok(claims) => claims,
            };
            if let Err(why) = self.still_valid(&claims).await {
                return refuse(why);
            }
            let audiences = claims
                .aud
                .iter()
                .filter(|a| credentials.audiences.contains(a))
                .cloned()
                .collect();
            Ok(Some(Authenticated {
                user: user_of(&claims),
                audiences,
            }))
        })
    }
}

fn refuse(why: String) -> Result<Option<Authenticated>, ApiError> {
    tracing::info!(%why, "service-account token refused");
    Err(ApiError::Unauthorized)
}

/// The token's user, as kube-apiserver names it, with the pod it is
/// bound to and the token's id in `extra`.
fn user_of(claims: &Claims) -> UserInfo {
    let k = &claims.kubernetes;
    let mut extra = BTreeMap::new();
    if let Some(Binding::Pod(pod)) = claims.binding() {
        extra.insert(
            "authentication.kubernetes.io/pod-name".into(),
            vec![pod.name],
        );
        extra.insert("authentication.kubernetes.io/pod-uid".into(), vec![pod.uid]);
    }
    if !claims.jti.is_empty() {
        let id = format!("JTI={}", claims.jti);
        extra.insert(
            "authentication.kubernetes.io/credential-id".into(),
            vec![id],
        );
    }
    UserInfo {
        name: auth::service_account_user(&k.namespace, &k.serviceaccount.name),
        uid: k.serviceaccount.uid.clone(),
        groups: auth::service_account_groups(&k.namespace),
        extra,
    }
}

impl ServiceAccounts {
    /// The objects the token names are still there, the same ones.
    async fn still_valid(&self, claims: &Claims) -> Result<(), String> {
        let k = &claims.kubernetes;
        let account = &k.serviceaccount;
        self.check("ServiceAccount", &k.namespace, &account.name, &account.uid)
            .await?;
        match claims.binding() {
            Some(Binding::Pod(pod)) => self.check("Pod", &k.namespace, &pod.name, &pod.uid).await,
            Some(Binding::Secret(secret)) => {
                self.check("Secret", &k.namespace, &secret.name, &secret.uid)
                    .await
            }
            None => Ok(()),
        }
    }

    async fn check(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Result<(), String> {
        let object = lookup(&self.catalog, kind, namespace, name, Some("0"))
            .await
            .map_err(|e| format!("{kind} {namespace}/{name}: {e}"))?;
        let Some(object) = object else {
            return Err(format!("{kind} {namespace}/{name} has been deleted"));
        };
        let metadata = &object["metadata"];
        if metadata["uid"].as_str() != Some(uid) {
            return Err(format!(
                "{kind} {namespace}/{name}: its uid ({}) does not match the token's ({uid})",
                metadata["uid"].as_str().unwrap_or("")
            ));
        }
        if !metadata["deletionTimestamp"].is_null() {
            return Err(format!("{kind} {namespace}/{name} is being deleted"));
        }
        Ok(())
    }
}

/// The core object of `kind` named so, or None if it is gone: at
/// `resource_version` "0" whatever its type's watch cache holds (as
/// kube-apiserver's authenticator reads its informers), at None a
/// consistent read.
pub async fn lookup(
    catalog: &Catalog,
    kind: &str,
    namespace: &str,
    name: &str,
    resource_version: Option<&str>,
) -> Result<Option<Value>, ApiError> {
    let entry = catalog
        .entries()
        .iter()
        .find(|e| e.strategy.def().group.is_empty() && e.strategy.def().kind == kind)
        .ok_or_else(|| ApiError::BadRequest(format!("no core type of kind {kind}")))?;
    let get = requests::Get {
        namespace: namespace.to_string(),
        name: name.to_string(),
        part: Part::Main,
        resource_version: resource_version.map(str::to_string),
    };
    match entry.call(get).await {
        Ok(object) => Ok(Some(object)),
        Err(ApiError::NotFound(_)) => Ok(None),
        Err(err) => Err(err),
    }
}
