//! What a request asks of the authorizers (Kubernetes'
//! `authorizer.Attributes`), and how kube-apiserver words a refusal.

use super::UserInfo;
use crate::object::selector::{FieldSelector, LabelSelector};

/// One question: may `user` do `verb` on a resource (by API group,
/// resource, subresource, namespace and name, empty where the request
/// names none) or on a path that is no resource (`/healthz`)?
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    pub user: &'a UserInfo,
    pub verb: &'a str,
    /// Empty for a cluster-scoped resource or a request across namespaces.
    pub namespace: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub name: &'a str,
    /// A request for a resource (else for [`Attributes::path`]).
    pub resource_request: bool,
    /// The request's path; what a non-resource request is about.
    pub path: &'a str,
    /// The field selector a list, watch or deletecollection names, when
    /// it parses: it can only narrow what is asked.
    pub field_selector: Option<&'a FieldSelector>,
    /// The label selector likewise.
    pub label_selector: Option<&'a LabelSelector>,
}

impl<'a> Attributes<'a> {
    /// `verb` on `resource` of `group`, across namespaces and names.
    pub fn for_resource(
        user: &'a UserInfo,
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
    ) -> Attributes<'a> {
        Attributes {
            user,
            verb,
            namespace: "",
            group,
            resource,
            subresource: "",
            name: "",
            resource_request: true,
            path: "",
            field_selector: None,
            label_selector: None,
        }
    }

    /// `verb` on a path that is no resource.
    pub fn for_path(user: &'a UserInfo, verb: &'a str, path: &'a str) -> Attributes<'a> {
        Attributes {
            resource_request: false,
            path,
            ..Attributes::for_resource(user, verb, "", "")
        }
    }

    pub fn with_namespace(self, namespace: &'a str) -> Attributes<'a> {
        Attributes { namespace, ..self }
    }

    pub fn with_name(self, name: &'a str) -> Attributes<'a> {
        Attributes { name, ..self }
    }

    pub fn with_subresource(self, subresource: &'a str) -> Attributes<'a> {
        Attributes {
            subresource,
            ..self
        }
    }

    /// kube-apiserver's denial message: `pods "p" is forbidden: User "u"
    /// cannot get resource "pods/log" in API group "" in the namespace
    /// "ns"`, `... at the cluster scope`, or `forbidden: User "u" cannot
    /// get path "/metrics"`, with the authorizers' reason after a colon.
    pub fn forbidden(&self, reason: &str) -> String {
        let user = &self.user.name;
        let verb = self.verb;
        let message = match self.resource_request {
            false => format!(
                "forbidden: User {user:?} cannot {verb} path {:?}",
                self.path
            ),
            true => {
                let mut resource = self.resource.to_string();
                if !self.subresource.is_empty() {
                    resource = format!("{resource}/{}", self.subresource);
                }
                let group = self.group;
                let scope = match self.namespace {
                    "" => "at the cluster scope".to_string(),
                    ns => format!("in the namespace {ns:?}"),
                };
                let mut qualified = self.resource.to_string();
                if !group.is_empty() {
                    qualified = format!("{qualified}.{group}");
                }
                let subject = match self.name {
                    "" => qualified,
                    name => format!("{qualified} {name:?}"),
                };
                format!(
                    "{subject} is forbidden: User {user:?} cannot {verb} resource {resource:?} \
                     in API group {group:?} {scope}"
                )
            }
        };
        match reason.is_empty() {
            true => message,
            false => format!("{message}: {reason}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_read_as_kube_apiserver_writes_them() {
        let alice = UserInfo::named("alice", &["system:authenticated"]);
        let configmaps = Attributes::for_resource(&alice, "list", "", "configmaps");
        assert_eq!(
            configmaps.with_namespace("team").forbidden(""),
            "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team\""
        );
        let scale = Attributes::for_resource(&alice, "update", "apps", "deployments")
            .with_name("web")
            .with_subresource("scale");
        assert_eq!(
            scale.forbidden("RBAC: role.rbac.authorization.k8s.io \"x\" not found"),
            "deployments.apps \"web\" is forbidden: User \"alice\" cannot update resource \"deployments/scale\" in API group \"apps\" at the cluster scope: RBAC: role.rbac.authorization.k8s.io \"x\" not found"
        );
        assert_eq!(
            Attributes::for_path(&alice, "get", "/metrics").forbidden(""),
            "forbidden: User \"alice\" cannot get path \"/metrics\""
        );
    }
}
