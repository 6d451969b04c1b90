//! Fault injection for tests, never on in production: with
//! `--experimental-watch-delay D` every event of the manager's watches
//! reaches its caches D late (each one D after it arrived, so the stream
//! lags by D without slowing down), which is how a controller's cache
//! trails the API under load; `RESOURCE=D` (`pods=5s`) delays only the
//! watches of that resource, so one cache trails the others. Process
//! tests use it to show that expectations keep a lagging controller from
//! creating twice.

use std::time::Duration;

use capstan_client::connect::{ResponseBody, Transport};
use futures::StreamExt;
use http::Request;
use http_body_util::{BodyExt, StreamBody};
use kube::client::Body;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, Service, ServiceExt};

/// `transport` with the responses of watches (of `resource` only, if
/// given) delayed by `delay`.
pub fn delay_watches(transport: Transport, resource: Option<String>, delay: Duration) -> Transport {
    let service = tower::service_fn(move |request: Request<Body>| {
        let uri = request.uri();
        let watching = uri
            .query()
            .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
        let chosen = resource
            .as_ref()
            .is_none_or(|r| uri.path().ends_with(&format!("/{r}")));
        let is_watch = watching && chosen;
        let mut inner = transport.clone();
        async move {
            let response = inner.ready().await?.call(request).await?;
            Ok::<_, BoxError>(match is_watch {
                true => response.map(|body| delayed(body, delay)),
                false => response,
            })
        }
    });
    BoxCloneSyncService::new(service)
}

/// The frames of `body`, each released `delay` after it arrived.
fn delayed(mut body: ResponseBody, delay: Duration) -> ResponseBody {
    let (sender, receiver) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(frame) = body.frame().await {
            if sender.send((Instant::now() + delay, frame)).is_err() {
                return;
            }
        }
    });
    let frames = futures::stream::unfold(receiver, |mut receiver| async move {
        let (due, frame) = receiver.recv().await?;
        tokio::time::sleep_until(due).await;
        Some((frame, receiver))
    });
    StreamBody::new(frames.boxed()).boxed_unsync()
}
