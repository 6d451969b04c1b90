//! Which transformer a stored value goes through, by its etcd key. Keys
//! are `<prefix>/<resource>/...` for built-in types and
//! `<prefix>/<group>/<resource>/...` for custom resources (whose groups
//! always hold a dot, which resource names never do); the built-in
//! types' groups are told at start. The first rule naming a resource, in
//! the file's order, is its rule (so `*.*` goes last, as kube requires).

use std::collections::HashMap;
use std::sync::Arc;

use super::transformer::Transformer;

/// A `resources[].resources` entry: `secrets`, `widgets.example.com`,
/// `*.apps` (every resource of a group), `*.` (of the core group), `*.*`.
#[derive(Debug, Clone, PartialEq)]
pub enum Pattern {
    Resource { group: String, resource: String },
    Group(String),
    All,
}

impl Pattern {
    pub fn parse(text: &str) -> Result<Pattern, String> {
        let (resource, group) = text.split_once('.').unwrap_or((text, ""));
        match (resource, group) {
            ("", _) => Err("a resource name is required".into()),
            ("*", "*") => Ok(Pattern::All),
            ("*", group) => Ok(Pattern::Group(group.to_string())),
            (_, "*") => Err("a resource of every group is not supported; use *.*".into()),
            (resource, _) if resource.contains('*') => Err("'*' stands alone".into()),
            (resource, group) => Ok(Pattern::Resource {
                group: group.to_string(),
                resource: resource.to_string(),
            }),
        }
    }

    fn matches(&self, group: &str, resource: &str) -> bool {
        match self {
            Pattern::Resource {
                group: g,
                resource: r,
            } => g == group && r == resource,
            Pattern::Group(g) => g == group,
            Pattern::All => true,
        }
    }
}

pub struct Rule {
    pub pattern: Pattern,
    pub transformer: Arc<Transformer>,
}

/// The transformers of every resource, looked up by etcd key.
pub struct Encryption {
    prefix: String,
    rules: Vec<Rule>,
    /// Built-in resource → its group (keys do not say it).
    groups: HashMap<String, String>,
    identity: Arc<Transformer>,
}

impl Encryption {
    /// Nothing encrypted: values stored as they are.
    pub fn none() -> Encryption {
        Encryption::new("", Vec::new(), &[])
    }

    /// `rules` for keys under `prefix`; `builtin` the built-in
    /// (group, resource) pairs.
    pub fn new(prefix: &str, rules: Vec<Rule>, builtin: &[(String, String)]) -> Encryption {
        let groups = builtin
            .iter()
            .map(|(group, resource)| (resource.clone(), group.clone()))
            .collect();
        Encryption {
            prefix: format!("{prefix}/"),
            rules,
            groups,
            identity: Arc::new(Transformer::identity()),
        }
    }

    /// Whether any resource is encrypted at all.
    pub fn is_none(&self) -> bool {
        self.rules.is_empty()
    }

    /// The transformer of the resource `key` belongs to.
    pub fn for_key(&self, key: &str) -> &Transformer {
        if self.rules.is_empty() {
            return &self.identity;
        }
        let Some(rest) = key.strip_prefix(&self.prefix) else {
            return &self.identity;
        };
        let mut segments = rest.split('/');
        let first = segments.next().unwrap_or_default();
        let (group, resource) = match first.contains('.') {
            true => (first, segments.next().unwrap_or_default()),
            false => (self.groups.get(first).map_or("", String::as_str), first),
        };
        self.rules
            .iter()
            .find(|rule| rule.pattern.matches(group, resource))
            .map_or(&self.identity, |rule| &rule.transformer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(pattern: &str, transformer: &Arc<Transformer>) -> Rule {
        Rule {
            pattern: Pattern::parse(pattern).unwrap(),
            transformer: transformer.clone(),
        }
    }

    #[test]
    fn patterns_parse_as_kube_writes_them() {
        assert_eq!(
            Pattern::parse("widgets.example.com").unwrap(),
            Pattern::Resource {
                group: "example.com".into(),
                resource: "widgets".into()
            }
        );
        assert_eq!(
            Pattern::parse("*.apps").unwrap(),
            Pattern::Group("apps".into())
        );
        assert_eq!(Pattern::parse("*.").unwrap(), Pattern::Group("".into()));
        assert_eq!(Pattern::parse("*.*").unwrap(), Pattern::All);
        assert!(Pattern::parse("secrets.*").is_err());
        assert!(Pattern::parse("").is_err());
    }

    #[test]
    fn keys_find_their_resource_rule() {
        let first = Arc::new(Transformer::new(Vec::new()));
        let apps = Arc::new(Transformer::new(Vec::new()));
        let builtin = [
            ("".to_string(), "secrets".to_string()),
            ("apps".to_string(), "deployments".to_string()),
        ];
        let rules = vec![
            rule("secrets", &first),
            rule("widgets.example.com", &first),
            rule("*.apps", &apps),
        ];
        let e = Encryption::new("/registry", rules, &builtin);
        let same = |key: &str, t: &Arc<Transformer>| std::ptr::eq(e.for_key(key), t.as_ref());
        assert!(same("/registry/secrets/default/s1", &first));
        assert!(same("/registry/example.com/widgets/ns/w", &first));
        assert!(same("/registry/deployments/ns/d", &apps));
        assert!(!same("/registry/configmaps/ns/c", &first));
        assert!(!same("/registry/example.com/gadgets/ns/g", &first));
        assert!(!same("/other/secrets/default/s1", &first));
    }
}
