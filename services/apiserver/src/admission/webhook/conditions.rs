//! A webhook's `matchConditions`: CEL expressions over kube's `object`,
//! `oldObject` and `request` that must all be true for the webhook to be
//! called. One false skips the webhook whatever else happened; an error
//! (or a value that is not a bool) with none false follows the
//! failurePolicy: Ignore skips the webhook, Fail refuses the request
//! with kube's 403. Expressions were checked when the configuration was
//! written; they are compiled once and kept by their text. A hook's
//! conditions share kube's budget for match conditions, and each stops
//! past kube's per-call limit, which is an error like any other.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cel::Value as Cel;
use serde_json::Value;

use super::super::policy::expressions::{compile, evaluate, Budget, Expression, Inputs};
use super::super::policy::request_input;
use super::super::{AdmissionError, Attributes};
use super::hook::Hook;
use crate::expression::cost::MATCH_CONDITIONS_BUDGET;

/// Compiled expressions kept at most; past it the cache starts over
/// (configurations change rarely, so this only bounds a pathological
/// stream of distinct expressions).
const KEPT: usize = 1024;

/// Whether `hook`'s conditions let it be called on this request.
pub fn allow_call(
    hook: &Hook,
    attributes: &Attributes<'_>,
    object: Option<&Value>,
) -> Result<bool, AdmissionError> {
    if hook.match_conditions.is_empty() {
        return Ok(true);
    }
    let inputs = Inputs {
        object: object.cloned().unwrap_or_default(),
        old_object: attributes.old_object.cloned().unwrap_or_default(),
        request: request_input(attributes, object),
        ..Inputs::default()
    };
    let activation = inputs.activation();
    let mut budget = Budget::of(MATCH_CONDITIONS_BUDGET);
    let mut errors = Vec::new();
    for condition in &hook.match_conditions {
        let outcome = compiled(&condition.expression).and_then(|expression| {
            evaluate(&expression, &inputs, &activation, &mut budget).map_err(|e| e.to_string())
        });
        match outcome {
            Ok(Cel::Bool(true)) => {}
            Ok(Cel::Bool(false)) => return Ok(false),
            Ok(other) => errors.push(format!(
                "matchCondition '{}' is not a bool: {other:?}",
                condition.name
            )),
            Err(why) => errors.push(format!(
                "matchCondition '{}' resulted in error: {why}",
                condition.name
            )),
        }
    }
    match errors.is_empty() || hook.ignores_failure() {
        true => Ok(errors.is_empty()),
        false => Err(AdmissionError::denied("MatchConditions", errors.join(", "))),
    }
}

fn compiled(source: &str) -> Result<Arc<Expression>, String> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<Expression>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut kept = cache.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(expression) = kept.get(source) {
        return Ok(expression.clone());
    }
    let expression = Arc::new(compile(source)?);
    if kept.len() >= KEPT {
        kept.clear();
    }
    kept.insert(source.to_string(), expression.clone());
    Ok(expression)
}

#[cfg(test)]
mod tests {
    use super::super::super::plugins::testing;
    use super::super::super::Operation;
    use super::*;
    use crate::auth::UserInfo;
    use serde_json::json;

    fn hook(failure_policy: &str, conditions: Value) -> Hook {
        serde_json::from_value(json!({
            "name": "h.example.com", "clientConfig": {"url": "https://x/"}, "sideEffects": "None",
            "failurePolicy": failure_policy, "matchConditions": conditions}))
        .unwrap()
    }

    #[test]
    fn every_condition_must_hold_and_errors_follow_the_failure_policy() {
        let user = UserInfo::anonymous();
        let a = testing::attributes(Operation::Create, "configmaps", "ns", "c", &user);
        let labelled = json!({"metadata": {"name": "c", "labels": {"team": "a"}}});
        let team_a = json!([
            {"name": "is-create", "expression": "request.operation == 'CREATE'"},
            {"name": "team-a", "expression": "object.metadata.labels.team == 'a'"}]);
        let call = |h: &Hook, o: &Value| allow_call(h, &a, Some(o));
        assert_eq!(call(&hook("Fail", team_a.clone()), &labelled), Ok(true));
        let other = json!({"metadata": {"name": "c", "labels": {"team": "b"}}});
        assert_eq!(call(&hook("Fail", team_a), &other), Ok(false));

        // No labels: the lookup fails. Fail refuses, Ignore skips; a
        // false condition skips whatever the others did.
        let broken = json!([{"name": "team", "expression": "object.metadata.labels.team == 'a'"}]);
        let bare = json!({"metadata": {"name": "c"}});
        let err = call(&hook("Fail", broken.clone()), &bare).unwrap_err();
        let AdmissionError::Denied(denial) = err else {
            panic!("{err:?}")
        };
        assert!(
            denial
                .reason
                .starts_with("matchCondition 'team' resulted in error: "),
            "{denial:?}"
        );
        assert_eq!(call(&hook("Ignore", broken.clone()), &bare), Ok(false));
        let mut with_false = broken.as_array().unwrap().clone();
        with_false.push(json!({"name": "never", "expression": "false"}));
        assert_eq!(
            call(&hook("Fail", Value::from(with_false)), &bare),
            Ok(false)
        );
        let not_bool = json!([{"name": "n", "expression": "1"}]);
        let err = call(&hook("Fail", not_bool), &bare).unwrap_err();
        assert!(
            err.to_string().contains("matchCondition 'n' is not a bool"),
            "{err}"
        );
    }
}
