//! Writing an object's status the way kube's controllers do: a PUT of the
//! `status` subresource (what their roles grant: `update` on
//! `<resource>/status`), conditional on the resourceVersion the
//! controller read.
//!
//! Two ways to meet a conflict, as in kube:
//! - [`update_status`] returns it. Much of a Deployment's, Job's, CronJob's
//!   or autoscaler's status accumulates (a CronJob's lastScheduleTime and
//!   active Jobs, a Job's counts), so putting a status computed from an
//!   older copy on a newer one could undo what a later sync wrote. The key
//!   is requeued and the next sync starts from the newer object.
//! - [`update_derived_status`] reads the object again and writes the same
//!   status once more. Only for a status computed wholly from other
//!   objects (a ReplicaSet's or DaemonSet's counts of its pods), which is
//!   as true on the newer copy as on the older.

use std::fmt::Debug;

use kube::api::{Api, PostParams};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{Error, Result};

/// Sets the status with `apply` on a copy of `object` and writes it,
/// conditional on `object`'s resourceVersion. A deleted object is not an
/// error (`None`); a conflict is, so the caller's key is retried.
pub async fn update_status<K>(api: &Api<K>, object: &K, apply: impl Fn(&mut K)) -> Result<Option<K>>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
{
    let mut updated = object.clone();
    apply(&mut updated);
    match write_status(api, &updated).await {
        Err(err) if err.is_not_found() => Ok(None),
        other => other.map(Some),
    }
}

/// As [`update_status`], but on a conflict `apply` is used once more on a
/// fresh read. `apply` must set a status that does not depend on the
/// object's own earlier status.
pub async fn update_derived_status<K>(
    api: &Api<K>,
    object: &K,
    apply: impl Fn(&mut K),
) -> Result<Option<K>>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
{
    match update_status(api, object, &apply).await {
        Err(err) if err.is_conflict() => {}
        other => return other,
    }
    let name = object.meta().name.clone().unwrap_or_default();
    match api.get_opt(&name).await? {
        Some(fresh) => update_status(api, &fresh, apply).await,
        None => Ok(None),
    }
}

async fn write_status<K>(api: &Api<K>, object: &K) -> Result<K>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
{
    let name = object.meta().name.clone().unwrap_or_default();
    let body = serde_json::to_vec(object).map_err(|e| Error::Invalid(e.to_string()))?;
    Ok(api
        .replace_status(&name, &PostParams::default(), body)
        .await?)
}

#[cfg(test)]
mod tests {
    use capstan_client::testing::FakeApi;
    use k8s_openapi::api::batch::v1::CronJob;
    use kube::api::Api;
    use serde_json::json;

    use super::{update_derived_status, update_status};
    use crate::testkit::object;

    fn cronjob() -> CronJob {
        object(json!({
            "metadata": {"name": "tick", "namespace": "default"},
            "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}},
        }))
    }

    /// The copy read first, and the store after a later sync recorded a
    /// schedule time on it.
    async fn stale_and_newer(fake: &FakeApi, api: &Api<CronJob>) -> CronJob {
        let stale = fake.insert(&cronjob());
        update_status(api, &stale, |c| {
            c.status = Some(object(json!({"lastScheduleTime": "2026-11-28T20:00:00Z"})))
        })
        .await
        .unwrap();
        stale
    }

    fn last_schedule(fake: &FakeApi) -> Option<String> {
        let stored: CronJob = fake.get(Some("default"), "tick").unwrap();
        stored
            .status
            .and_then(|s| s.last_schedule_time)
            .map(|t| t.0.to_rfc3339())
    }

    #[tokio::test]
    async fn a_status_from_a_stale_copy_is_refused_and_undoes_nothing() {
        let fake = FakeApi::new();
        let api: Api<CronJob> = Api::namespaced(fake.client(), "default");
        let stale = stale_and_newer(&fake, &api).await;
        let err = update_status(&api, &stale, |c| c.status = Some(object(json!({}))))
            .await
            .unwrap_err();
        assert!(err.is_conflict(), "{err}");
        assert_eq!(
            last_schedule(&fake).as_deref(),
            Some("2026-11-28T20:00:00+00:00")
        );
    }

    #[tokio::test]
    async fn a_derived_status_is_written_again_on_the_newer_copy() {
        let fake = FakeApi::new();
        let api: Api<CronJob> = Api::namespaced(fake.client(), "default");
        let stale = stale_and_newer(&fake, &api).await;
        let written = update_derived_status(&api, &stale, |c| c.status = Some(object(json!({}))))
            .await
            .unwrap();
        assert!(written.is_some());
        assert_eq!(last_schedule(&fake), None);
    }

    #[tokio::test]
    async fn a_deleted_object_is_not_an_error() {
        let fake = FakeApi::new();
        let api: Api<CronJob> = Api::namespaced(fake.client(), "default");
        let gone = object::<CronJob>(json!({
            "metadata": {"name": "tick", "namespace": "default", "resourceVersion": "7"}}));
        let written = update_status(&api, &gone, |_| {}).await.unwrap();
        assert!(written.is_none());
    }
}
