//! kube's CEL authorizer library for ValidatingAdmissionPolicy:
//! `authorizer.group('apps').resource('deployments').namespace('ns')
//! .name('d').check('create').allowed()`, `authorizer.path('/healthz')
//! .check('get')`, `authorizer.serviceAccount('ns', 'sa')` to ask for
//! someone else, and `authorizer.requestResource` (the request's own
//! resource). Builder steps are opaque CEL values; only `check` asks the
//! server's authorizer ([`Authorizer`]), which is synchronous.

use std::sync::Arc;

use cel::extractors::This;
use cel::objects::{Opaque, ResolveResult};
use cel::{Context, ExecutionError, Value};

use crate::admission::Attributes;
use crate::auth::{self, Authorizer, UserInfo};

/// The key of the `authorizer` map that holds who asks; the map's other
/// key is `requestResource`.
const WHO: &str = "@user";

#[derive(Debug, Clone, PartialEq, Eq)]
struct Asker(UserInfo);

#[derive(Debug, Clone, PartialEq, Eq)]
struct GroupCheck {
    user: UserInfo,
    group: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct ResourceCheck {
    user: UserInfo,
    group: String,
    resource: String,
    subresource: String,
    namespace: String,
    name: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct PathCheck {
    user: UserInfo,
    path: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Decision(auth::Decision);

macro_rules! opaque {
    ($($t:ty => $name:literal),*) => {$(
        impl Opaque for $t {
            fn runtime_type_name(&self) -> &str {
                $name
            }
        }
    )*};
}

opaque!(
    Asker => "kubernetes.authorization.Authorizer",
    GroupCheck => "kubernetes.authorization.GroupCheck",
    ResourceCheck => "kubernetes.authorization.ResourceCheck",
    PathCheck => "kubernetes.authorization.PathCheck",
    Decision => "kubernetes.authorization.Decision"
);

fn wrap(value: impl Opaque) -> Value {
    Value::Opaque(Arc::new(value))
}

/// The `authorizer` variable for a request.
pub fn variable(a: &Attributes<'_>) -> Value {
    let request = ResourceCheck {
        user: a.user.clone(),
        group: a.group.into(),
        resource: a.resource.into(),
        subresource: a.subresource.into(),
        namespace: a.namespace.into(),
        name: a.name.into(),
    };
    let map = std::collections::HashMap::from([
        (WHO.to_string(), wrap(Asker(a.user.clone()))),
        ("requestResource".to_string(), wrap(request)),
    ]);
    Value::from(map)
}

/// Adds the library's functions to an evaluation's context; `check`
/// asks `authorizer`, or fails when the server has none for admission.
pub fn install(context: &mut Context, authorizer: Option<Arc<dyn Authorizer>>) {
    let check = move |This(this): This<Value>, verb: Arc<String>| -> ResolveResult {
        let authorizer = authorizer
            .as_ref()
            .ok_or_else(|| failed("check", "no authorizer is configured"))?;
        ask(authorizer.as_ref(), &this, &verb)
    };
    let added = [
        context.add_function("group", group),
        context.add_function("path", path),
        context.add_function("serviceAccount", service_account),
        context.add_function("resource", |This(this): This<Value>, v: Arc<String>| {
            let check = opaque::<GroupCheck>(&this, "resource")?;
            Ok(wrap(ResourceCheck {
                user: check.user.clone(),
                group: check.group.clone(),
                resource: v.to_string(),
                ..ResourceCheck::default()
            }))
        }),
        context.add_function("subresource", |This(t): This<Value>, v: Arc<String>| {
            refine(&t, "subresource", |c| c.subresource = v.to_string())
        }),
        context.add_function("namespace", |This(t): This<Value>, v: Arc<String>| {
            refine(&t, "namespace", |c| c.namespace = v.to_string())
        }),
        context.add_function("name", |This(t): This<Value>, v: Arc<String>| {
            refine(&t, "name", |c| c.name = v.to_string())
        }),
        context.add_function("check", check),
        context.add_function("allowed", |This(t): This<Value>| -> ResolveResult {
            let decision = opaque::<Decision>(&t, "allowed")?;
            Ok(Value::Bool(decision.0.is_allowed()))
        }),
        context.add_function("reason", |This(t): This<Value>| -> ResolveResult {
            let decision = &opaque::<Decision>(&t, "reason")?.0;
            Ok(Value::from(decision.reason()))
        }),
        // Our authorizers answer or have no opinion; they do not fail.
        context.add_function("errored", |This(t): This<Value>| -> ResolveResult {
            opaque::<Decision>(&t, "errored").map(|_| Value::Bool(false))
        }),
        context.add_function("error", |This(t): This<Value>| -> ResolveResult {
            opaque::<Decision>(&t, "error").map(|_| Value::from(""))
        }),
    ];
    debug_assert!(added.iter().all(Result::is_ok), "{added:?}");
}

fn failed(function: &str, why: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, why)
}

/// `value` as the opaque type `T`, or an error naming `function`.
fn opaque<'v, T: Opaque>(value: &'v Value, function: &str) -> Result<&'v T, ExecutionError> {
    match value {
        Value::Opaque(o) => o.downcast_ref::<T>(),
        _ => None,
    }
    .ok_or_else(|| failed(function, format!("no such overload for {value:?}")))
}

/// Who asks: the `authorizer` map's user, or a serviceAccount's.
fn asker<'v>(value: &'v Value, function: &str) -> Result<&'v UserInfo, ExecutionError> {
    if let Value::Map(map) = value {
        if let Some(who) = map.map.get(&cel::objects::Key::from(WHO)) {
            return opaque::<Asker>(who, function).map(|a| &a.0);
        }
    }
    opaque::<Asker>(value, function).map(|a| &a.0)
}

fn group(This(this): This<Value>, group: Arc<String>) -> ResolveResult {
    let user = asker(&this, "group")?.clone();
    Ok(wrap(GroupCheck {
        user,
        group: group.to_string(),
    }))
}

fn path(This(this): This<Value>, path: Arc<String>) -> ResolveResult {
    let user = asker(&this, "path")?.clone();
    Ok(wrap(PathCheck {
        user,
        path: path.to_string(),
    }))
}

/// kube's service account user: its name and the groups it is in.
fn service_account(
    This(this): This<Value>,
    namespace: Arc<String>,
    name: Arc<String>,
) -> ResolveResult {
    asker(&this, "serviceAccount")?;
    let mut groups = auth::service_account_groups(&namespace);
    groups.push(auth::AUTHENTICATED.into());
    Ok(wrap(Asker(UserInfo {
        name: auth::service_account_user(&namespace, &name),
        groups,
        ..UserInfo::default()
    })))
}

fn refine(this: &Value, function: &str, change: impl FnOnce(&mut ResourceCheck)) -> ResolveResult {
    let mut check = opaque::<ResourceCheck>(this, function)?.clone();
    change(&mut check);
    Ok(wrap(check))
}

fn ask(authorizer: &dyn Authorizer, this: &Value, verb: &str) -> ResolveResult {
    let answer = if let Ok(r) = opaque::<ResourceCheck>(this, "check") {
        let asked = auth::Attributes::for_resource(&r.user, verb, &r.group, &r.resource)
            .with_subresource(&r.subresource)
            .with_namespace(&r.namespace)
            .with_name(&r.name);
        authorizer.authorize(&asked)
    } else {
        let p = opaque::<PathCheck>(this, "check")?;
        authorizer.authorize(&auth::Attributes::for_path(&p.user, verb, &p.path))
    };
    Ok(wrap(Decision(answer)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::plugins::testing::attributes;
    use crate::admission::Operation;
    use crate::expression::{compile, Activation, Budget};
    use std::sync::Mutex;

    /// Allows `alice` to create deployments in `ns`; records questions.
    #[derive(Default)]
    struct Alice(Mutex<Vec<String>>);

    impl Authorizer for Alice {
        fn authorize(&self, q: &auth::Attributes) -> auth::Decision {
            let asked = format!(
                "{} {} {}/{}/{} {}/{} {:?}",
                q.user.name,
                q.verb,
                q.group,
                q.resource,
                q.subresource,
                q.namespace,
                q.name,
                (!q.resource_request).then_some(q.path)
            );
            self.0.lock().unwrap().push(asked);
            match (q.user.name.as_str(), q.verb, q.resource, q.namespace) {
                ("alice", "create", "deployments", "ns") => auth::Decision::Allow,
                _ => auth::Decision::NoOpinion("RBAC: not allowed".into()),
            }
        }
    }

    fn run(source: &str, authorizer: Arc<Alice>, user: &str) -> Result<Value, String> {
        let who = UserInfo::named(user, &[]);
        let a = attributes(Operation::Create, "pods", "ns", "p", &who);
        let expression = compile(source, &["authorizer"])?;
        let authorizer: Arc<dyn Authorizer> = authorizer;
        let activation = Activation::new().with("authorizer", variable(&a));
        let mut budget = Budget::default();
        expression
            .evaluate_with(&activation, &mut budget, |context| {
                install(context, Some(authorizer))
            })
            .map_err(|e| e.to_string())
    }

    /// kube's cost of a check allows two per expression: a third stops
    /// the evaluation before it asks.
    #[test]
    fn a_third_check_in_one_expression_passes_the_cost_limit() {
        let alice = Arc::new(Alice::default());
        let check = "authorizer.group('apps').resource('deployments').namespace('ns').check('create').allowed()";
        let two = format!("{check} && {check}");
        assert_eq!(run(&two, alice.clone(), "alice"), Ok(Value::Bool(true)));
        let three = format!("{check} && {check} && {check}");
        let err = run(&three, alice.clone(), "alice").unwrap_err();
        assert_eq!(err, crate::expression::cost::CALL_LIMIT_EXCEEDED);
        assert_eq!(alice.0.lock().unwrap().len(), 4, "two asked each time");
        let looped = format!("[1, 2, 3, 4, 5, 6, 7, 8].all(i, {check})");
        assert!(run(&looped, alice.clone(), "alice").is_err());
        assert_eq!(alice.0.lock().unwrap().len(), 6);
    }

    #[test]
    fn checks_ask_the_authorizer_for_the_user() {
        let alice = Arc::new(Alice::default());
        let deployments = "authorizer.group('apps').resource('deployments').namespace('ns').name('d').check('create')";
        let allowed = format!("{deployments}.allowed()");
        assert_eq!(run(&allowed, alice.clone(), "alice"), Ok(Value::Bool(true)));
        assert_eq!(run(&allowed, alice.clone(), "bob"), Ok(Value::Bool(false)));
        let reason = format!("{deployments}.reason()");
        assert_eq!(
            run(&reason, alice.clone(), "bob"),
            Ok(Value::from("RBAC: not allowed"))
        );
        let asked = alice.0.lock().unwrap().clone();
        assert_eq!(asked[0], "alice create apps/deployments/ ns/d None");
    }

    #[test]
    fn request_resource_paths_and_service_accounts() {
        let alice = Arc::new(Alice::default());
        let own = "authorizer.requestResource.subresource('status').check('update').allowed()";
        assert_eq!(run(own, alice.clone(), "alice"), Ok(Value::Bool(false)));
        let path = "authorizer.path('/healthz').check('get').errored()";
        assert_eq!(run(path, alice.clone(), "alice"), Ok(Value::Bool(false)));
        let sa = "authorizer.serviceAccount('ns', 'bot').group('').resource('pods').check('list').allowed()";
        assert_eq!(run(sa, alice.clone(), "alice"), Ok(Value::Bool(false)));
        let asked = alice.0.lock().unwrap().clone();
        assert_eq!(
            asked,
            [
                "alice update /pods/status ns/p None",
                "alice get // / Some(\"/healthz\")",
                "system:serviceaccount:ns:bot list /pods/ / None",
            ]
        );
        let wrong = run("authorizer.check('get')", alice, "alice").unwrap_err();
        assert!(wrong.contains("check"), "{wrong}");
    }
}
