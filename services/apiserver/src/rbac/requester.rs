//! The requester a write carries to the type rules (see
//! `registry::strategy::Requester`): the request's user and the chain's
//! authorizer, which answers `escalate` and `bind` and resolves rules.

use std::sync::Arc;

use actix_web::{HttpMessage, HttpRequest};

use super::rule::PolicyRule;
use crate::registry::strategy::Requester;
use crate::routes::chain::authentication::User;
use crate::routes::chain::authorization::{Attributes, Authorizer, Decision};

/// The requester of a request the chain authenticated (it keeps the
/// user in the request's extensions); None for any other.
pub fn of_request(
    req: &HttpRequest,
    authorizer: &Arc<dyn Authorizer>,
) -> Option<Arc<dyn Requester>> {
    let user = req.extensions().get::<User>()?.clone();
    Some(Arc::new(RequestUser {
        user,
        authorizer: authorizer.clone(),
    }))
}

pub struct RequestUser {
    pub user: User,
    pub authorizer: Arc<dyn Authorizer>,
}

impl std::fmt::Debug for RequestUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestUser")
            .field("user", &self.user)
            .finish()
    }
}

impl Requester for RequestUser {
    fn name(&self) -> &str {
        &self.user.name
    }

    fn groups(&self) -> &[String] {
        &self.user.groups
    }

    fn may(&self, verb: &str, group: &str, resource: &str, namespace: &str, name: &str) -> bool {
        let attributes = Attributes {
            user: &self.user,
            verb,
            group,
            resource,
            subresource: None,
            namespace: Some(namespace).filter(|n| !n.is_empty()),
            name: Some(name).filter(|n| !n.is_empty()),
            path: None,
        };
        self.authorizer.authorize(&attributes) == Decision::Allow
    }

    fn rules(&self, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
        let list = self.authorizer.rules_for(&self.user, namespace);
        (list.rules, list.errors)
    }

    fn role_rules(
        &self,
        role: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<PolicyRule>, String> {
        let kind = if role == "roles" {
            "role"
        } else {
            "clusterrole"
        };
        self.authorizer
            .role_rules(role, namespace, name)
            .unwrap_or_else(|| {
                Err(format!(
                    "{kind}.rbac.authorization.k8s.io {name:?} not found"
                ))
            })
    }
}
