//! The `ValidatingAdmissionPolicy` plugin: for each binding (by name)
//! whose policy covers the request, the policy's match conditions, then
//! its validations; each failure goes where the binding's
//! validationActions say. Policies and bindings come from the watch
//! caches; a policy is compiled once per generation, not per request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cel::Value as Cel;
use serde_json::{json, Value};

use super::compiled::{Compiled, Validation};
use super::expressions::{evaluate, Budget, EvalError, Inputs};
use super::matching::covers;
use super::{authz, params};
use crate::admission::objects::{Freshness, Objects, NAMESPACES};
use crate::admission::objects::{
    VALIDATING_ADMISSION_POLICIES, VALIDATING_ADMISSION_POLICY_BINDINGS,
};
use crate::admission::{AdmissionError, Admit, Attributes, Plugin};
use crate::auth::AuthorizerSlot;
use crate::expression::cost::MATCH_CONDITIONS_BUDGET;
use crate::expression::Activation;
use crate::object::meta;

/// The audit annotation failures recorded with the Audit action go to.
const AUDIT_KEY: &str = "validation.policy.admission.k8s.io/validation_failure";

/// A policy compiled, or why it does not compile.
type Compilation = Arc<Result<Compiled, String>>;

pub struct ValidatingAdmissionPolicy {
    objects: Arc<dyn Objects>,
    /// By policy name: the uid and generation compiled, and the result.
    compiled: Mutex<HashMap<String, (String, Compilation)>>,
    /// What CEL's `authorizer` asks (empty until start-up fills it).
    authorizer: AuthorizerSlot,
}

/// One failed validation (or an error the failure policy makes one).
struct Failure {
    message: String,
    reason: &'static str,
    index: usize,
    /// A configuration error: kube denies it whatever the binding's
    /// validationActions say.
    config: bool,
}

/// What the bindings decided for one request.
#[derive(Default)]
struct Verdicts {
    denial: Option<(&'static str, String)>,
    audits: Vec<Value>,
}

impl ValidatingAdmissionPolicy {
    pub fn new(objects: Arc<dyn Objects>) -> ValidatingAdmissionPolicy {
        ValidatingAdmissionPolicy {
            objects,
            compiled: Mutex::default(),
            authorizer: AuthorizerSlot::default(),
        }
    }

    /// The plugin with `authorizer` behind CEL's `authorizer.check()`.
    pub fn authorized(self, authorizer: AuthorizerSlot) -> ValidatingAdmissionPolicy {
        ValidatingAdmissionPolicy { authorizer, ..self }
    }

    /// `policy` compiled, from the cache while its generation holds.
    pub(super) fn compiled(&self, policy: &Value) -> Compilation {
        let metadata = &policy["metadata"];
        let version = format!(
            "{}/{}",
            metadata["uid"].as_str().unwrap_or_default(),
            metadata["generation"]
        );
        let name = meta::name(policy).to_string();
        let mut cache = self.compiled.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((seen, compiled)) = cache.get(&name) {
            if *seen == version {
                return compiled.clone();
            }
        }
        let compiled = Compiled::from_policy(policy).map_err(|bad| {
            let reasons: Vec<String> = bad
                .into_iter()
                .map(|b| format!("{}: {}", b.field, b.why))
                .collect();
            reasons.join("; ")
        });
        let compiled = Arc::new(compiled);
        cache.insert(name, (version, compiled.clone()));
        compiled
    }

    async fn admit(
        &self,
        a: &Attributes<'_>,
        object: Option<&Value>,
    ) -> Result<(), AdmissionError> {
        let cached = Freshness::Cached;
        let mut bindings = self
            .objects
            .list(VALIDATING_ADMISSION_POLICY_BINDINGS, "", cached)
            .await?;
        if bindings.is_empty() {
            return Ok(());
        }
        bindings.sort_by(|x, y| meta::name(x).cmp(meta::name(y)));
        let policies = self
            .objects
            .list(VALIDATING_ADMISSION_POLICIES, "", cached)
            .await?;
        let namespace = match a.namespace {
            "" => None,
            ns => self.objects.get(NAMESPACES, "", ns, cached).await?,
        };
        let inputs = Inputs {
            object: object.cloned().unwrap_or_default(),
            old_object: a.old_object.cloned().unwrap_or_default(),
            request: request(a, object),
            params: Value::Null,
            namespace_object: namespace.clone().unwrap_or_default(),
            variables: HashMap::new(),
            authorizer: authz::variable(a),
            checker: self.authorizer.get().cloned(),
        };
        let mut verdicts = Verdicts::default();
        for binding in &bindings {
            let wanted = binding["spec"]["policyName"].as_str().unwrap_or_default();
            let Some(policy) = policies.iter().find(|p| meta::name(p) == wanted) else {
                continue;
            };
            let failures = match self.compiled(policy).as_ref() {
                Ok(compiled) => {
                    let covered = covered(compiled, binding, a, object, namespace.as_ref());
                    match covered {
                        Ok(true) => self.judge(compiled, policy, binding, a, &inputs).await,
                        Ok(false) => Vec::new(),
                        Err(why) => compiled.fail(misconfigured("policy", &why)),
                    }
                }
                Err(why) if policy["spec"]["failurePolicy"] != "Ignore" => {
                    vec![misconfigured("policy", why)]
                }
                Err(_) => Vec::new(),
            };
            verdicts.apply(wanted, binding, failures, a);
        }
        verdicts.finish(a)
    }

    /// What one binding's policy finds wrong with a request it covers:
    /// the failures of every evaluation, one per parameter object.
    async fn judge(
        &self,
        compiled: &Compiled,
        policy: &Value,
        binding: &Value,
        a: &Attributes<'_>,
        inputs: &Inputs,
    ) -> Vec<Failure> {
        let found = params::collect(
            &*self.objects,
            &policy["spec"],
            &binding["spec"],
            a.namespace,
        )
        .await;
        let found = match found {
            Ok(found) => found,
            Err(why) => return compiled.fail(misconfigured("binding", &why)),
        };
        let mut failures = Vec::new();
        for param in found {
            let mut inputs = inputs.clone();
            inputs.params = param;
            failures.extend(evaluate_policy(compiled, a, inputs));
        }
        failures
    }
}

impl Plugin for ValidatingAdmissionPolicy {
    fn name(&self) -> &str {
        "ValidatingAdmissionPolicy"
    }

    fn validate<'a>(&'a self, a: &'a Attributes<'a>, object: Option<&'a Value>) -> Admit<'a> {
        Box::pin(self.admit(a, object))
    }
}

/// kube's configuration error (`failed to configure binding: ...`).
fn misconfigured(what: &str, why: &str) -> Failure {
    Failure {
        message: format!("failed to configure {what}: {why}"),
        reason: "Invalid",
        index: 0,
        config: true,
    }
}

impl Compiled {
    /// A configuration error as the failure policy has it: a failure
    /// when it is Fail, nothing when Ignore.
    fn fail(&self, failure: Failure) -> Vec<Failure> {
        match self.fail_closed {
            true => vec![failure],
            false => Vec::new(),
        }
    }
}

/// Whether the policy's constraints and the binding's matchResources
/// both cover the request.
fn covered(
    policy: &Compiled,
    binding: &Value,
    a: &Attributes<'_>,
    object: Option<&Value>,
    namespace: Option<&Value>,
) -> Result<bool, String> {
    let resources = &binding["spec"]["matchResources"];
    let yes = covers(&policy.constraints, a, object, namespace)?;
    match resources.is_object() {
        true if yes => covers(resources, a, object, namespace),
        _ => Ok(yes),
    }
}

/// One evaluation of a policy (with one `params`): match conditions (on
/// kube's budget for them), then variables, validations and audit
/// annotations, which share kube's budget for a binding. The inputs are
/// converted to CEL once, for all of them.
fn evaluate_policy(policy: &Compiled, a: &Attributes<'_>, mut inputs: Inputs) -> Vec<Failure> {
    let mut activation = inputs.activation();
    if let Some(failures) = unmatched(policy, &inputs, &activation) {
        return failures;
    }
    let mut budget = Budget::default();
    for variable in &policy.variables {
        // A variable that fails is left out: an expression using it fails.
        match evaluate(&variable.expression, &inputs, &activation, &mut budget) {
            Ok(value) => inputs.set_variable(&mut activation, &variable.name, value),
            Err(stop) if stop.stops_the_rest() => return policy.fail(out_of_budget(stop, 0)),
            Err(_) => {}
        }
    }
    let failures = validations(policy, &inputs, &activation, &mut budget);
    annotate(policy, a, &inputs, &activation, &mut budget);
    failures
}

/// `Some` when the policy's match conditions leave the request alone
/// (nothing to report) or fail (what the failure policy makes of it).
fn unmatched(policy: &Compiled, inputs: &Inputs, activation: &Activation) -> Option<Vec<Failure>> {
    let fail = |why: String| Some(policy.fail(misconfigured("policy", &why)));
    let mut budget = Budget::of(MATCH_CONDITIONS_BUDGET);
    for condition in &policy.match_conditions {
        let name = &condition.name;
        match evaluate(&condition.expression, inputs, activation, &mut budget) {
            Ok(Cel::Bool(true)) => {}
            Ok(Cel::Bool(false)) => return Some(Vec::new()),
            Ok(other) => return fail(format!("matchCondition '{name}' is not a bool: {other:?}")),
            Err(e) => return fail(format!("matchCondition '{name}' resulted in error: {e}")),
        }
    }
    None
}

fn annotate(
    policy: &Compiled,
    a: &Attributes<'_>,
    inputs: &Inputs,
    activation: &Activation,
    budget: &mut Budget,
) {
    for annotation in &policy.audit_annotations {
        if let Ok(Cel::String(value)) = evaluate(&annotation.expression, inputs, activation, budget)
        {
            if !value.is_empty() {
                a.feedback.annotate(
                    format!("{}/{}", policy.name, annotation.name),
                    value.as_str(),
                );
            }
        }
    }
}

/// kube's failure when the budget runs out: no further expression runs.
fn out_of_budget(stop: EvalError, index: usize) -> Failure {
    Failure {
        message: stop.to_string(),
        reason: "Invalid",
        index,
        config: false,
    }
}

fn validations(
    policy: &Compiled,
    inputs: &Inputs,
    activation: &Activation,
    budget: &mut Budget,
) -> Vec<Failure> {
    let mut failures = Vec::new();
    for (index, validation) in policy.validations.iter().enumerate() {
        let source = &validation.expression.source;
        let message = match evaluate(&validation.expression, inputs, activation, budget) {
            Ok(Cel::Bool(true)) => continue,
            Ok(Cel::Bool(false)) => message(validation, inputs, activation, budget)
                .unwrap_or_else(|| format!("failed expression: {source}")),
            Ok(other) => format!("expression '{source}' resulted in a non-bool: {other:?}"),
            Err(stop) if stop.stops_the_rest() => {
                failures.extend(policy.fail(out_of_budget(stop, index)));
                break;
            }
            Err(_) if !policy.fail_closed => continue,
            Err(e) => format!("expression '{source}' resulted in error: {e}"),
        };
        failures.push(Failure {
            message,
            reason: validation.reason,
            index,
            config: false,
        });
    }
    failures
}

/// The failure's message: messageExpression's string, else `message`.
fn message(
    validation: &Validation,
    inputs: &Inputs,
    activation: &Activation,
    budget: &mut Budget,
) -> Option<String> {
    let evaluated = validation.message_expression.as_ref().and_then(|e| {
        match evaluate(e, inputs, activation, budget) {
            Ok(Cel::String(text)) if !text.trim().is_empty() => Some(text.to_string()),
            _ => None,
        }
    });
    let fixed = &validation.message;
    evaluated.or_else(|| (!fixed.is_empty()).then(|| fixed.to_string()))
}

impl Verdicts {
    /// Sends a binding's failures where its validationActions say.
    fn apply(&mut self, policy: &str, binding: &Value, failures: Vec<Failure>, a: &Attributes<'_>) {
        let name = meta::name(binding);
        let actions: Vec<&str> = binding["spec"]["validationActions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        for failure in failures {
            let deny = failure.config || actions.contains(&"Deny");
            if deny && self.denial.is_none() {
                let message = format!(
                    "ValidatingAdmissionPolicy '{policy}' with binding '{name}' denied request: {}",
                    failure.message
                );
                self.denial = Some((failure.reason, message));
            }
            if actions.contains(&"Warn") && !failure.config {
                a.feedback.warn(format!(
                    "Validation failed for ValidatingAdmissionPolicy '{policy}' with binding '{name}': {}",
                    failure.message
                ));
            }
            if actions.contains(&"Audit") {
                self.audits.push(
                    json!({"message": failure.message, "policy": policy, "binding": name,
                    "expressionIndex": failure.index, "validationActions": actions}),
                );
            }
        }
    }

    fn finish(self, a: &Attributes<'_>) -> Result<(), AdmissionError> {
        if !self.audits.is_empty() {
            a.feedback
                .annotate(AUDIT_KEY, Value::from(self.audits).to_string());
        }
        match self.denial {
            Some((reason, message)) => Err(AdmissionError::Refused { reason, message }),
            None => Ok(()),
        }
    }
}

/// kube's `request` variable (an AdmissionRequest's fields).
pub fn request(a: &Attributes<'_>, object: Option<&Value>) -> Value {
    let typed = object.or(a.old_object).unwrap_or(&Value::Null);
    let api_version = typed["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = json!({"group": group, "version": version, "kind": typed["kind"]});
    let resource = json!({"group": a.group, "version": a.version, "resource": a.resource});
    json!({
        "kind": kind, "requestKind": kind,
        "resource": resource, "requestResource": resource,
        "subResource": a.subresource, "requestSubResource": a.subresource,
        "name": a.name, "namespace": a.namespace,
        "operation": a.operation.as_str(),
        "userInfo": a.user.to_json(),
        "dryRun": a.dry_run,
    })
}
