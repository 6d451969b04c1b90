//! Building a profile's framework from its configuration: instantiate each
//! plugin once, then expand MultiPoint into every extension point a plugin
//! serves, in kube's order (plugins re-configured at a point first, then
//! MultiPoint's, then the point's other plugins).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::handle::ClusterLister;
use super::interface::Plugin;
use super::registry::{PluginContext, Registry};
use crate::config::defaults::VOLUME_PLUGINS;
use crate::config::{ExtensionPoint, FieldError, ProfileConfig};

/// A plugin placed at one extension point, with its weight (Score only).
#[derive(Clone)]
pub struct Placed {
    pub plugin: Arc<dyn Plugin>,
    pub weight: i64,
}

/// The plugins of each extension point, in order.
pub type PointLists = BTreeMap<ExtensionPoint, Vec<Placed>>;

fn serves(plugin: &dyn Plugin, point: ExtensionPoint) -> bool {
    match point {
        ExtensionPoint::PreEnqueue => plugin.as_pre_enqueue().is_some(),
        ExtensionPoint::QueueSort => plugin.is_queue_sort(),
        ExtensionPoint::PreFilter => plugin.as_pre_filter().is_some(),
        ExtensionPoint::Filter => plugin.as_filter().is_some(),
        ExtensionPoint::PostFilter => plugin.as_post_filter().is_some(),
        ExtensionPoint::PreScore => plugin.as_pre_score().is_some(),
        ExtensionPoint::Score => plugin.as_score().is_some(),
        ExtensionPoint::Reserve => plugin.as_reserve().is_some(),
        ExtensionPoint::Permit => plugin.as_permit().is_some(),
        ExtensionPoint::Bind => plugin.is_binder(),
        ExtensionPoint::PreBind | ExtensionPoint::PostBind => false,
    }
}

/// Instantiates the profile's plugins and lists them per extension point.
pub fn build_points(
    profile: &ProfileConfig,
    registry: &Registry,
    lister: &Arc<dyn ClusterLister>,
) -> Result<PointLists, FieldError> {
    let plugins = instantiate(profile, registry, lister)?;
    let mut lists = PointLists::new();
    for point in ExtensionPoint::ALL {
        let set = &profile.points[&point];
        let mut placed = Vec::new();
        let explicit: Vec<&str> = set.enabled.iter().map(|p| p.name.as_str()).collect();
        let mut overridden = Vec::new();
        let mut from_multi_point = Vec::new();
        if !set.disables_all() {
            for entry in &profile.multi_point.enabled {
                let Some(plugin) = plugins.get(entry.name.as_str()) else {
                    continue;
                };
                if !serves(plugin.as_ref(), point) || set.disables(&entry.name) {
                    continue;
                }
                if explicit.contains(&entry.name.as_str()) {
                    overridden.push(entry.name.as_str());
                } else {
                    from_multi_point.push(Placed {
                        plugin: plugin.clone(),
                        weight: score_weight(entry.weight),
                    });
                }
            }
        }
        let explicit_placed = |name: &str| {
            let entry = set.enabled.iter().find(|p| p.name == name).expect("listed");
            Placed {
                plugin: plugins[name].clone(),
                weight: score_weight(entry.weight),
            }
        };
        for name in &overridden {
            placed.push(explicit_placed(name));
        }
        placed.extend(from_multi_point);
        for (i, name) in explicit.iter().enumerate() {
            if overridden.contains(name) {
                continue;
            }
            if !serves(plugins[*name].as_ref(), point) {
                return Err(FieldError::new(
                    format!(
                        "profiles[{}].plugins.{}.enabled[{i}]",
                        profile.index,
                        point.field()
                    ),
                    format!(
                        "Invalid value: {name:?}: plugin does not implement the {} extension point",
                        point.field()
                    ),
                ));
            }
            placed.push(explicit_placed(name));
        }
        lists.insert(point, placed);
    }
    check_required(profile, &lists)?;
    Ok(lists)
}

/// A score weight; kube counts an unset or zero weight as 1.
fn score_weight(weight: Option<i32>) -> i64 {
    match weight {
        None | Some(0) => 1,
        Some(w) => i64::from(w),
    }
}

fn instantiate(
    profile: &ProfileConfig,
    registry: &Registry,
    lister: &Arc<dyn ClusterLister>,
) -> Result<BTreeMap<String, Arc<dyn Plugin>>, FieldError> {
    let mut names: Vec<(String, String)> = profile
        .multi_point
        .enabled
        .iter()
        .map(|p| {
            (
                p.name.clone(),
                format!("profiles[{}].plugins.multiPoint", profile.index),
            )
        })
        .collect();
    for (point, set) in &profile.points {
        names.extend(set.enabled.iter().map(|p| {
            (
                p.name.clone(),
                format!("profiles[{}].plugins.{}", profile.index, point.field()),
            )
        }));
    }
    let mut plugins = BTreeMap::new();
    for (name, field) in names {
        if plugins.contains_key(&name) {
            continue;
        }
        let Some(factory) = registry.get(&name) else {
            let message = if VOLUME_PLUGINS.contains(&name.as_str()) {
                format!("Invalid value: {name:?}: Capstan schedules no volumes, so this plugin can only be disabled")
            } else {
                format!("Invalid value: {name:?}: no plugin of that name is registered")
            };
            return Err(FieldError::new(field, message));
        };
        let (index, args) = match profile.plugin_args.get(&name) {
            Some((index, args)) => (Some(*index), args.clone()),
            None => (None, serde_json::Value::Null),
        };
        let plugin = factory(&PluginContext {
            args: &args,
            lister: lister.clone(),
        })
        .map_err(|e| {
            let base = format!(
                "profiles[{}].pluginConfig[{}].args",
                profile.index,
                index.unwrap_or(0)
            );
            let field = if e.field.is_empty() {
                base
            } else {
                format!("{base}.{}", e.field)
            };
            FieldError::new(field, e.message)
        })?;
        plugins.insert(name, plugin);
    }
    Ok(plugins)
}

fn check_required(profile: &ProfileConfig, lists: &PointLists) -> Result<(), FieldError> {
    for (point, what) in [
        (ExtensionPoint::QueueSort, "a queue sort plugin"),
        (ExtensionPoint::Bind, "a bind plugin"),
    ] {
        let count = lists[&point].len();
        if count != 1 {
            return Err(FieldError::new(
                format!("profiles[{}].plugins.{}", profile.index, point.field()),
                format!("Invalid value: {count} plugins: exactly one is required ({what})"),
            ));
        }
    }
    Ok(())
}
