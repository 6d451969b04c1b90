//! The horizontal-pod-autoscaler controller (autoscaling/v2): every
//! `--horizontal-pod-autoscaler-sync-period` each autoscaler reads its
//! target's scale subresource (any kind with one), the pods' resource
//! usage from metrics.k8s.io through the aggregator, proposes a count
//! per metric (`replicas`), holds it to the stabilization windows and
//! rate policies (`behavior`), scales, and reports in its status
//! (`conditions`) and events.
//!
//! Wiring: the autoscalers' informer; a new autoscaler or a changed spec
//! is synced at once, and every one again each sync period, as kube's
//! resync does (usage changes without any object changing).

mod behavior;
mod compute;
mod conditions;
mod metrics_client;
mod milli;
mod replicas;
mod sync;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use capstan_client::informer::InformerEvent;
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use parking_lot::Mutex;

use crate::config::Settings;
use crate::context::Context;
use crate::error::Result;
use crate::scale::Scales;
use replicas::Calculator;
use sync::Syncer;

/// kube's service account for this controller.
pub const ACCOUNT: &str = "horizontal-pod-autoscaler";
const QUEUE: &str = "horizontalpodautoscaler";

fn on_event(queue: &WorkQueue<String>, event: &InformerEvent<HorizontalPodAutoscaler>) {
    match event {
        // Its own status writes come back as updates: only a new spec
        // (generation) is worth a sync before the next period.
        InformerEvent::Updated { old, new }
            if old.metadata.generation == new.metadata.generation => {}
        _ => queue.add(event.key()),
    }
}

/// The calculator and windows the settings ask for.
fn calculator(settings: &Settings) -> (Calculator, Duration, Duration) {
    let calculator = Calculator {
        tolerance: settings.horizontal_pod_autoscaler_tolerance,
        cpu_initialization_period: settings.duration_of(
            &settings.horizontal_pod_autoscaler_cpu_initialization_period,
            Duration::from_secs(300),
        ),
        initial_readiness_delay: settings.duration_of(
            &settings.horizontal_pod_autoscaler_initial_readiness_delay,
            Duration::from_secs(30),
        ),
    };
    let sync_period = settings.duration_of(
        &settings.horizontal_pod_autoscaler_sync_period,
        Duration::from_secs(15),
    );
    let downscale = settings.duration_of(
        &settings.horizontal_pod_autoscaler_downscale_stabilization,
        Duration::from_secs(300),
    );
    (calculator, sync_period, downscale)
}

pub async fn run(ctx: Arc<Context>) -> Result<()> {
    let client = ctx.client_for(ACCOUNT).await?;
    let recorder = ctx.recorder(&client, "horizontal-pod-autoscaler");
    let autoscalers = ctx.informers.get::<HorizontalPodAutoscaler>();
    let queue = WorkQueue::<String>::new(QUEUE);
    let q = queue.clone();
    autoscalers
        .add_handler(move |event: &InformerEvent<HorizontalPodAutoscaler>| on_event(&q, event));
    tokio::select! {
        _ = ctx.stop.cancelled() => return Ok(()),
        _ = autoscalers.wait_synced() => {}
    }
    let (calculator, sync_period, downscale_window) = calculator(&ctx.settings);
    let syncer = Arc::new(Syncer {
        autoscalers: autoscalers.store(),
        client,
        recorder,
        scales: Scales::default(),
        calculator,
        downscale_window,
        histories: Mutex::new(HashMap::new()),
    });
    let (store, q) = (autoscalers.store(), queue.clone());
    let resync = async move {
        let mut ticks = tokio::time::interval(sync_period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            store.keys().into_iter().for_each(|key| q.add(key));
        }
    };
    let workers = ctx.settings.concurrent_horizontal_pod_autoscaler_syncs;
    let run = ctx.serve(QUEUE, queue, workers, syncer);
    tokio::select! {
        _ = run => {}
        _ = resync => {}
    }
    Ok(())
}
