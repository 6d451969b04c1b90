//! The server's authorizer (the `--authorization-mode` union, RBAC
//! included) as admission asks it: ValidatingAdmissionPolicy's CEL
//! `authorizer.check()` gets the same answer the handler chain would.

use std::sync::Arc;

use crate::admission::authorize::{Answer, Authorize, Question};
use crate::routes::chain::authentication::User;
use crate::routes::chain::authorization::{Attributes, Authorizer, Decision};

pub struct ForAdmission(pub Arc<dyn Authorizer>);

impl Authorize for ForAdmission {
    fn authorize(&self, q: &Question<'_>) -> Answer {
        let user = User {
            name: q.user.name.clone(),
            groups: q.user.groups.clone(),
            ..User::default()
        };
        fn present(s: &str) -> Option<&str> {
            (!s.is_empty()).then_some(s)
        }
        let attributes = Attributes {
            user: &user,
            verb: q.verb,
            group: q.group,
            resource: q.resource,
            subresource: present(q.subresource),
            namespace: present(q.namespace),
            name: present(q.name),
            path: q.path,
        };
        match self.0.authorize(&attributes) {
            Decision::Allow => Answer::Allow(String::new()),
            Decision::Deny(reason) => Answer::Deny(reason),
            Decision::NoOpinion(reason) => Answer::NoOpinion(reason),
        }
    }
}
