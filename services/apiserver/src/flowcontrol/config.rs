//! The API objects read into what the engine acts on: each priority
//! level's shares, lending and queuing; the flow schemas in matching
//! order. A level whose spec the engine cannot use is left out (as if
//! absent), a schema naming a missing level is dangling and left out, and
//! the mandatory objects are supplied when missing, as kube does.

use k8s_openapi::api::flowcontrol::v1::{
    FlowSchema, PolicyRulesWithSubjects, PriorityLevelConfiguration, PriorityLevelConfigurationSpec,
};

use super::bootstrap::{mandatory_levels, mandatory_schemas, CATCH_ALL, EXEMPT};
use super::dealer::Dealer;

/// kube's defaults for a limited level without these fields.
const DEFAULT_SHARES: u32 = 30;
const DEFAULT_QUEUES: u32 = 64;
const DEFAULT_HAND_SIZE: u32 = 8;
const DEFAULT_QUEUE_LENGTH_LIMIT: u32 = 50;

/// How a limited level holds requests it cannot serve yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queuing {
    pub queues: u32,
    pub hand_size: u32,
    pub queue_length_limit: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelSpec {
    pub name: String,
    pub uid: Option<String>,
    pub exempt: bool,
    pub shares: u32,
    pub lendable_percent: u32,
    /// None: may borrow up to the whole server limit.
    pub borrowing_limit_percent: Option<u32>,
    /// None: a limited level that rejects at once, or the exempt level.
    pub queuing: Option<Queuing>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SchemaSpec {
    pub name: String,
    pub uid: Option<String>,
    pub level: String,
    pub precedence: i32,
    pub distinguisher: Distinguisher,
    pub rules: Vec<PolicyRulesWithSubjects>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distinguisher {
    None,
    ByUser,
    ByNamespace,
}

/// Whether a schema's level exists: the Dangling condition to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaStatus {
    pub schema: String,
    pub level: String,
    pub dangling: bool,
}

/// The digested configuration.
#[derive(Debug, Clone)]
pub struct Digested {
    pub levels: Vec<LevelSpec>,
    /// In matching order: lowest matchingPrecedence first, then by name.
    pub schemas: Vec<SchemaSpec>,
    pub statuses: Vec<SchemaStatus>,
}

/// Reads `levels` and `schemas`, supplying the mandatory ones.
pub fn digest(levels: &[PriorityLevelConfiguration], schemas: &[FlowSchema]) -> Digested {
    let mut level_specs: Vec<LevelSpec> = levels.iter().filter_map(level_spec).collect();
    for mandatory in mandatory_levels() {
        if !level_specs
            .iter()
            .any(|l| Some(l.name.as_str()) == mandatory.metadata.name.as_deref())
        {
            level_specs.extend(level_spec(&mandatory));
        }
    }
    let mut statuses = Vec::new();
    let mut schema_specs = Vec::new();
    for fs in schemas {
        let Some(spec) = schema_spec(fs) else {
            continue;
        };
        let dangling = !level_specs.iter().any(|l| l.name == spec.level);
        statuses.push(SchemaStatus {
            schema: spec.name.clone(),
            level: spec.level.clone(),
            dangling,
        });
        if !dangling {
            schema_specs.push(spec);
        }
    }
    for mandatory in mandatory_schemas() {
        if !schema_specs
            .iter()
            .any(|s| Some(s.name.as_str()) == mandatory.metadata.name.as_deref())
        {
            schema_specs.extend(schema_spec(&mandatory));
        }
    }
    schema_specs.sort_by(|a, b| (a.precedence, &a.name).cmp(&(b.precedence, &b.name)));
    Digested {
        levels: level_specs,
        schemas: schema_specs,
        statuses,
    }
}

/// The engine's view of a level, or None when its spec is unusable (a
/// broken union, the exempt type under another name, bad queuing).
pub fn level_spec(pl: &PriorityLevelConfiguration) -> Option<LevelSpec> {
    let name = pl.metadata.name.clone()?;
    let spec = pl.spec.as_ref()?;
    let uid = pl.metadata.uid.clone();
    let exempt = spec.type_ == "Exempt";
    if exempt != (name == EXEMPT) || exempt != spec.exempt.is_some() {
        return None;
    }
    if exempt {
        let e = spec.exempt.as_ref()?;
        return Some(LevelSpec {
            name,
            uid,
            exempt,
            shares: non_negative(e.nominal_concurrency_shares.unwrap_or(0))?,
            lendable_percent: percent(e.lendable_percent.unwrap_or(0))?,
            borrowing_limit_percent: None,
            queuing: None,
        });
    }
    limited_spec(name, uid, spec)
}

fn limited_spec(
    name: String,
    uid: Option<String>,
    spec: &PriorityLevelConfigurationSpec,
) -> Option<LevelSpec> {
    if spec.type_ != "Limited" {
        return None;
    }
    let limited = spec.limited.as_ref()?;
    let response = limited.limit_response.clone().unwrap_or_default();
    let queuing = match (response.type_.as_str(), &response.queuing) {
        ("Reject", None) => None,
        ("Queue", queuing) => {
            let q = queuing.clone().unwrap_or_default();
            let queuing = Queuing {
                queues: positive(q.queues, DEFAULT_QUEUES)?,
                hand_size: positive(q.hand_size, DEFAULT_HAND_SIZE)?,
                queue_length_limit: positive(q.queue_length_limit, DEFAULT_QUEUE_LENGTH_LIMIT)?,
            };
            Dealer::new(queuing.queues, queuing.hand_size).ok()?;
            Some(queuing)
        }
        _ => return None,
    };
    Some(LevelSpec {
        name,
        uid,
        exempt: false,
        shares: non_negative(
            limited
                .nominal_concurrency_shares
                .unwrap_or(DEFAULT_SHARES as i32),
        )?,
        lendable_percent: percent(limited.lendable_percent.unwrap_or(0))?,
        borrowing_limit_percent: match limited.borrowing_limit_percent {
            Some(p) => Some(non_negative(p)?),
            None => None,
        },
        queuing,
    })
}

/// The engine's view of a schema, or None when it has no spec.
pub fn schema_spec(fs: &FlowSchema) -> Option<SchemaSpec> {
    let spec = fs.spec.as_ref()?;
    let distinguisher = match spec.distinguisher_method.as_ref().map(|m| m.type_.as_str()) {
        None => Distinguisher::None,
        Some("ByUser") => Distinguisher::ByUser,
        Some("ByNamespace") => Distinguisher::ByNamespace,
        Some(_) => return None,
    };
    Some(SchemaSpec {
        name: fs.metadata.name.clone()?,
        uid: fs.metadata.uid.clone(),
        level: spec.priority_level_configuration.name.clone(),
        precedence: spec.matching_precedence.unwrap_or(1000),
        distinguisher,
        rules: spec.rules.clone().unwrap_or_default(),
    })
}

/// Whether `name` is one the server supplies when it is missing.
pub fn is_mandatory(name: &str) -> bool {
    name == EXEMPT || name == CATCH_ALL
}

fn positive(value: Option<i32>, default: u32) -> Option<u32> {
    match value {
        None => Some(default),
        Some(v) if v > 0 => Some(v as u32),
        Some(_) => None,
    }
}

fn non_negative(value: i32) -> Option<u32> {
    u32::try_from(value).ok()
}

fn percent(value: i32) -> Option<u32> {
    non_negative(value).filter(|p| *p <= 100)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flowcontrol::bootstrap::{suggested_levels, suggested_schemas};

    #[test]
    fn mandatory_objects_are_supplied_and_schemas_sorted() {
        let digested = digest(&[], &suggested_schemas());
        let names: Vec<_> = digested.levels.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["exempt", "catch-all"]);
        // Without their levels the suggested schemas dangle, except the
        // probes' one, which names the exempt level.
        let dangling: Vec<_> = digested.statuses.iter().filter(|s| s.dangling).collect();
        assert_eq!(dangling.len(), 10);
        let order: Vec<_> = digested.schemas.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(order, ["exempt", "probes", "catch-all"]);
    }

    #[test]
    fn suggested_configuration_reads_whole() {
        let levels: Vec<_> = suggested_levels()
            .into_iter()
            .chain(mandatory_levels())
            .collect();
        let digested = digest(&levels, &suggested_schemas());
        assert_eq!(digested.levels.len(), 8);
        assert!(digested.statuses.iter().all(|s| !s.dangling));
        assert_eq!(digested.schemas.len(), 13);
        let precedences: Vec<_> = digested.schemas.iter().map(|s| s.precedence).collect();
        assert!(precedences.windows(2).all(|w| w[0] <= w[1]));
        let high = digested
            .levels
            .iter()
            .find(|l| l.name == "workload-high")
            .unwrap();
        assert_eq!((high.shares, high.lendable_percent), (40, 50));
        assert_eq!(
            high.queuing,
            Some(Queuing {
                queues: 128,
                hand_size: 6,
                queue_length_limit: 50
            })
        );
    }

    #[test]
    fn unusable_levels_are_left_out() {
        let mut broken = suggested_levels().remove(0);
        broken.spec.as_mut().unwrap().type_ = "Exempt".into();
        assert_eq!(level_spec(&broken), None);
        let mut too_much_entropy = suggested_levels().remove(0);
        let limited = too_much_entropy
            .spec
            .as_mut()
            .unwrap()
            .limited
            .as_mut()
            .unwrap();
        let queuing = limited
            .limit_response
            .as_mut()
            .unwrap()
            .queuing
            .as_mut()
            .unwrap();
        queuing.queues = Some(1 << 20);
        queuing.hand_size = Some(20);
        assert_eq!(level_spec(&too_much_entropy), None);
    }
}
