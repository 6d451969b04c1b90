//! The claims of a service-account token, as kube-apiserver writes them:
//! the registered ones (iss, sub, aud, exp, iat, nbf, jti) and the private
//! `kubernetes.io` claim naming the service account and, for a bound
//! token, the Pod or Secret it is bound to.

use serde::{Deserialize, Serialize};

/// What a token names: an object's name and uid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectRef {
    pub name: String,
    pub uid: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KubernetesClaims {
    pub namespace: String,
    pub serviceaccount: ObjectRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<ObjectRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<ObjectRef>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claims {
    pub iss: String,
    pub sub: String,
    pub aud: Vec<String>,
    pub exp: i64,
    pub iat: i64,
    pub nbf: i64,
    #[serde(default)]
    pub jti: String,
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaims,
}

/// The object a token is bound to.
#[derive(Debug, Clone, PartialEq)]
pub enum Binding {
    Pod(ObjectRef),
    Secret(ObjectRef),
}

impl Claims {
    /// Claims for a token of service account `account` in `namespace`,
    /// valid from `now` (seconds since the epoch) for `seconds`.
    pub fn new(
        issuer: &str,
        namespace: &str,
        account: ObjectRef,
        audiences: Vec<String>,
        now: i64,
        seconds: i64,
        binding: Option<Binding>,
    ) -> Claims {
        let (pod, secret) = match binding {
            Some(Binding::Pod(pod)) => (Some(pod), None),
            Some(Binding::Secret(secret)) => (None, Some(secret)),
            None => (None, None),
        };
        Claims {
            iss: issuer.to_string(),
            sub: crate::auth::service_account_user(namespace, &account.name),
            aud: audiences,
            exp: now + seconds,
            iat: now,
            nbf: now,
            jti: uuid::Uuid::new_v4().to_string(),
            kubernetes: KubernetesClaims {
                namespace: namespace.to_string(),
                serviceaccount: account,
                pod,
                secret,
            },
        }
    }

    /// The object the token is bound to, if any.
    pub fn binding(&self) -> Option<Binding> {
        let k = &self.kubernetes;
        match (&k.pod, &k.secret) {
            (Some(pod), _) => Some(Binding::Pod(pod.clone())),
            (None, Some(secret)) => Some(Binding::Secret(secret.clone())),
            (None, None) => None,
        }
    }
}
