//! KubeSchedulerConfiguration (`kubescheduler.config.k8s.io/v1`) as it is
//! written in a file: every field optional, unknown fields refused (kube's
//! strict decoding).

use serde::{Deserialize, Serialize};

pub const API_VERSION: &str = "kubescheduler.config.k8s.io/v1";
pub const KIND: &str = "KubeSchedulerConfiguration";

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeSchedulerConfiguration {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub parallelism: Option<i32>,
    pub leader_election: Option<LeaderElectionConfiguration>,
    pub client_connection: Option<ClientConnection>,
    pub health_bind_address: Option<String>,
    pub metrics_bind_address: Option<String>,
    pub enable_profiling: Option<bool>,
    pub enable_contention_profiling: Option<bool>,
    pub percentage_of_nodes_to_score: Option<i32>,
    pub pod_initial_backoff_seconds: Option<i64>,
    pub pod_max_backoff_seconds: Option<i64>,
    pub profiles: Option<Vec<KubeSchedulerProfile>>,
    pub extenders: Option<Vec<serde_json::Value>>,
    pub delay_cache_until_active: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaderElectionConfiguration {
    pub leader_elect: Option<bool>,
    pub lease_duration: Option<String>,
    pub renew_deadline: Option<String>,
    pub retry_period: Option<String>,
    pub resource_lock: Option<String>,
    pub resource_name: Option<String>,
    pub resource_namespace: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientConnection {
    pub kubeconfig: Option<String>,
    pub accept_content_types: Option<String>,
    pub content_type: Option<String>,
    pub qps: Option<f32>,
    pub burst: Option<i32>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeSchedulerProfile {
    pub scheduler_name: Option<String>,
    pub percentage_of_nodes_to_score: Option<i32>,
    pub plugins: Option<Plugins>,
    pub plugin_config: Option<Vec<PluginConfig>>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Plugins {
    pub pre_enqueue: Option<PluginSet>,
    pub queue_sort: Option<PluginSet>,
    pub pre_filter: Option<PluginSet>,
    pub filter: Option<PluginSet>,
    pub post_filter: Option<PluginSet>,
    pub pre_score: Option<PluginSet>,
    pub score: Option<PluginSet>,
    pub reserve: Option<PluginSet>,
    pub permit: Option<PluginSet>,
    pub pre_bind: Option<PluginSet>,
    pub bind: Option<PluginSet>,
    pub post_bind: Option<PluginSet>,
    pub multi_point: Option<PluginSet>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginSet {
    pub enabled: Option<Vec<Plugin>>,
    pub disabled: Option<Vec<Plugin>>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Plugin {
    pub name: String,
    pub weight: Option<i32>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginConfig {
    pub name: String,
    pub args: Option<serde_json::Value>,
}
