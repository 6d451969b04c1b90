//! Whether the rules someone holds cover the rules they want to grant
//! (kube's `Covers`, the heart of escalation prevention and of bootstrap
//! reconciliation): every rule to grant is broken into one rule per group,
//! resource, verb and name (or per URL and verb), and each must be covered
//! by one held rule. What is missing is described as kube does.

use std::collections::BTreeSet;

use crate::auth::{url_covers, PolicyRule};

/// The atomic rules of `wanted` that `held` does not cover.
pub fn missing(held: &[PolicyRule], wanted: &[PolicyRule]) -> Vec<PolicyRule> {
    wanted
        .iter()
        .flat_map(breakdown)
        .filter(|atom| !held.iter().any(|owner| covers(owner, atom)))
        .collect()
}

/// One rule per group × resource × verb (× name), or per URL × verb.
fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let mut atoms = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                let atom = |names: Vec<String>| PolicyRule {
                    verbs: vec![verb.clone()],
                    api_groups: vec![group.clone()],
                    resources: vec![resource.clone()],
                    resource_names: names,
                    non_resource_urls: Vec::new(),
                };
                match rule.resource_names.is_empty() {
                    true => atoms.push(atom(Vec::new())),
                    false => {
                        atoms.extend(rule.resource_names.iter().map(|n| atom(vec![n.clone()])))
                    }
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            atoms.push(PolicyRule {
                verbs: vec![verb.clone()],
                non_resource_urls: vec![url.clone()],
                ..PolicyRule::default()
            });
        }
    }
    atoms
}

fn has(set: &[String], item: &str) -> bool {
    set.iter().any(|s| s == item)
}

fn has_all_or_star(set: &[String], items: &[String]) -> bool {
    has(set, "*") || items.iter().all(|i| has(set, i))
}

fn covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let resources = has(&owner.resources, "*")
        || sub.resources.iter().all(|r| {
            has(&owner.resources, r)
                || r.split_once('/')
                    .is_some_and(|(_, s)| has(&owner.resources, &format!("*/{s}")))
        });
    let urls = sub
        .non_resource_urls
        .iter()
        .all(|u| owner.non_resource_urls.iter().any(|o| url_covers(o, u)));
    let names = owner.resource_names.is_empty()
        || (!sub.resource_names.is_empty()
            && sub
                .resource_names
                .iter()
                .all(|n| has(&owner.resource_names, n)));
    has_all_or_star(&owner.verbs, &sub.verbs)
        && has_all_or_star(&owner.api_groups, &sub.api_groups)
        && resources
        && urls
        && names
}

/// Atomic rules merged back per group, resource and name (verbs joined),
/// each written as kube's CompactString, sorted, one a line.
pub fn describe(atoms: &[PolicyRule]) -> String {
    let mut merged: Vec<PolicyRule> = Vec::new();
    for atom in atoms {
        let same = merged.iter_mut().find(|m| {
            !atom.resources.is_empty()
                && m.api_groups == atom.api_groups
                && m.resources == atom.resources
                && m.resource_names == atom.resource_names
        });
        match same {
            Some(m) if !has(&m.verbs, &atom.verbs[0]) => m.verbs.push(atom.verbs[0].clone()),
            Some(_) => {}
            None => merged.push(atom.clone()),
        }
    }
    let lines: BTreeSet<String> = merged.iter().map(compact_string).collect();
    lines.into_iter().collect::<Vec<_>>().join("\n")
}

/// `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list"]}`
/// (Go's `%q` of a string slice).
fn compact_string(rule: &PolicyRule) -> String {
    let parts = [
        ("APIGroups", &rule.api_groups),
        ("Resources", &rule.resources),
        ("NonResourceURLs", &rule.non_resource_urls),
        ("ResourceNames", &rule.resource_names),
        ("Verbs", &rule.verbs),
    ];
    let shown: Vec<String> = parts
        .iter()
        .filter(|(_, set)| !set.is_empty())
        .map(|(name, set)| format!("{name}:{}", go_quoted(set)))
        .collect();
    format!("{{{}}}", shown.join(", "))
}

/// Go's `%q` of a string slice: `["a" "b"]`.
pub fn go_quoted(set: &[String]) -> String {
    let items: Vec<String> = set.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", items.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(value: serde_json::Value) -> Vec<PolicyRule> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn held_rules_cover_what_they_grant_and_not_more() {
        let held = rules(json!([
            {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "*/log"]},
            {"verbs": ["*"], "apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["web"]},
            {"verbs": ["get"], "nonResourceURLs": ["/apis/*"]}]));
        let fine = rules(json!([
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods", "pods/log"]},
            {"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["web"]},
            {"verbs": ["get"], "nonResourceURLs": ["/apis/apps"]}]));
        assert!(missing(&held, &fine).is_empty());
        let more = rules(json!([
            {"verbs": ["get", "delete", "create"], "apiGroups": [""], "resources": ["pods", "secrets"]},
            {"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments"]},
            {"verbs": ["get"], "nonResourceURLs": ["/metrics"]}]));
        let lacking = missing(&held, &more);
        assert_eq!(
            describe(&lacking),
            [
                "{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\" \"create\"]}",
                "{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\" \"create\"]}",
                "{APIGroups:[\"apps\"], Resources:[\"deployments\"], Verbs:[\"update\"]}",
                "{NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}",
            ]
            .join("\n")
        );
    }
}
