//! Whether a caller may do what it asks, decided by the API server
//! (delegated authorization: a SubjectAccessReview, as a kubelet in
//! Webhook mode and metrics-server ask), with answers kept for 10 s so a
//! `kubectl top` or a followed log does not cost a review per request.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::Api;
use parking_lot::Mutex;

use super::authentication::Caller;

/// How long an answer is kept (the kubelet's and metrics-server's default).
const KEEP: Duration = Duration::from_secs(10);
/// Answers kept at most; past it the cache starts over.
const MOST_ANSWERS: usize = 10_000;

/// What a request does, in the API's terms.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Action {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
}

impl Action {
    /// A verb on a node subresource (`nodes/proxy`, `nodes/log`...), as the
    /// kubelet maps its paths.
    pub fn on_node(verb: &str, node: &str, subresource: &str) -> Action {
        Action {
            verb: verb.into(),
            group: String::new(),
            resource: "nodes".into(),
            subresource: subresource.into(),
            namespace: String::new(),
            name: node.into(),
        }
    }
}

pub struct Authorizer {
    client: kube::Client,
    answers: Mutex<HashMap<(Caller, Action), (bool, Instant)>>,
}

impl Authorizer {
    pub fn new(client: kube::Client) -> Authorizer {
        Authorizer {
            client,
            answers: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `caller` may do `action`; an API that cannot be asked denies.
    pub async fn allowed(&self, caller: &Caller, action: &Action) -> bool {
        let key = (caller.clone(), action.clone());
        if let Some((answer, at)) = self.answers.lock().get(&key) {
            if at.elapsed() < KEEP {
                return *answer;
            }
        }
        let answer = self.ask(caller, action).await;
        let mut answers = self.answers.lock();
        if answers.len() >= MOST_ANSWERS {
            answers.clear();
        }
        answers.insert(key, (answer, Instant::now()));
        answer
    }

    async fn ask(&self, caller: &Caller, action: &Action) -> bool {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(caller.user.clone()),
                groups: Some(caller.groups.clone()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(action.verb.clone()),
                    group: Some(action.group.clone()),
                    resource: Some(action.resource.clone()),
                    subresource: Some(action.subresource.clone()),
                    namespace: Some(action.namespace.clone()),
                    name: Some(action.name.clone()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        match Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
        {
            Ok(answer) => answer.status.is_some_and(|s| s.allowed),
            Err(error) => {
                tracing::warn!(%error, "could not ask the API server for an authorization; denied");
                false
            }
        }
    }
}
