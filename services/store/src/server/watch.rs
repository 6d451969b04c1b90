//! `etcdserverpb.Watch`: one bidirectional stream carries many watchers.
//! Requests create, cancel or ask for progress; responses from the hub flow
//! back through one bounded channel per stream. Each create is checked
//! against the access rules, with the credentials the stream opened with.

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use capstan_proto::etcdserverpb::watch_create_request::FilterType;
use capstan_proto::etcdserverpb::watch_request::RequestUnion;
use capstan_proto::etcdserverpb::watch_server::Watch;
use capstan_proto::etcdserverpb::{WatchCreateRequest, WatchRequest, WatchResponse};
use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::context::Context;
use super::credentials::Credentials;
use crate::auth::Access;
use crate::error::StoreError;
use crate::mvcc::KeyRange;
use crate::watch::WatchFilter;

/// Responses buffered per stream before its watchers count as slow and
/// fall back to catching up from history.
const STREAM_BUFFER: usize = 1024;

static NEXT_STREAM_ID: AtomicU64 = AtomicU64::new(1);

pub struct WatchService(pub Arc<Context>);

type ResponseStream = Pin<Box<dyn Stream<Item = Result<WatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Watch for WatchService {
    type WatchStream = ResponseStream;

    async fn watch(
        &self,
        request: Request<Streaming<WatchRequest>>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let stream_id = NEXT_STREAM_ID.fetch_add(1, Ordering::Relaxed);
        let require_leader = super::require_leader::wanted(request.metadata());
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let mut session = Session {
            ctx: self.0.clone(),
            credentials: self.0.credentials(&request),
            stream_id,
            tx,
            ids: HashSet::new(),
            next_id: 0,
        };
        let mut incoming = request.into_inner();
        tokio::spawn(async move {
            while let Some(Ok(request)) = incoming.next().await {
                if !session.handle(request).await {
                    break;
                }
            }
            session.ctx.hub.cancel_stream(stream_id);
        });
        let ctx = self.0.clone();
        let responses = ReceiverStream::new(rx).map(move |mut response: WatchResponse| {
            let revision = match response.header.as_ref().map_or(0, |h| h.revision) {
                0 => ctx.mvcc.current_revision(),
                revision => revision,
            };
            response.header = Some(ctx.header(revision));
            Ok(response)
        });
        if !require_leader {
            return Ok(Response::new(Box::pin(responses)));
        }
        // Ends the stream with "no leader" once this member has lost the
        // cluster for long enough; the client goes to another member.
        let lost = Arc::new(AtomicBool::new(false));
        let (ctx, flag) = (self.0.clone(), lost.clone());
        let watch_leader = async move {
            super::require_leader::leader_lost(ctx).await;
            flag.store(true, Ordering::Relaxed);
        };
        let last_word = futures::stream::once(async move { lost.load(Ordering::Relaxed) })
            .filter_map(
                |lost| async move { lost.then(|| Err(Status::from(StoreError::NoLeader))) },
            );
        let responses = responses.take_until(watch_leader).chain(last_word);
        Ok(Response::new(Box::pin(responses)))
    }
}

/// The state of one watch stream.
struct Session {
    ctx: Arc<Context>,
    credentials: Credentials,
    stream_id: u64,
    tx: mpsc::Sender<WatchResponse>,
    ids: HashSet<i64>,
    next_id: i64,
}

impl Session {
    /// Handles one request; false once the client has gone.
    async fn handle(&mut self, request: WatchRequest) -> bool {
        let response = match request.request_union {
            Some(RequestUnion::CreateRequest(create)) => match self.refusal(&create).await {
                Some(refused) => Some((refused, None)),
                None => self.create(create),
            },
            Some(RequestUnion::CancelRequest(cancel)) => self.cancel(cancel.watch_id),
            Some(RequestUnion::ProgressRequest(_)) => self.progress(),
            None => None,
        };
        match response {
            Some((response, then)) => {
                if self.tx.send(response).await.is_err() {
                    return false;
                }
                if let Some(register) = then {
                    register(self);
                }
                true
            }
            None => true,
        }
    }

    /// etcd's answer to a create the stream's caller may not make: created
    /// and canceled at once, with the reason in etcd's words.
    async fn refusal(&self, create: &WatchCreateRequest) -> Option<WatchResponse> {
        let permitted = async {
            let caller = self.ctx.caller(&self.credentials).await?;
            let checker = self.ctx.auth.checker(&caller);
            checker.allows(Access::Read, &create.key, &create.range_end)
        };
        let reason = match permitted.await.err()? {
            err @ (StoreError::InvalidAuthToken
            | StoreError::AuthOldRevision
            | StoreError::UserEmpty) => err,
            _ => StoreError::PermissionDenied,
        };
        // etcd puts the whole gRPC error in the reason, as Go prints it;
        // clients match on that text.
        let cancel_reason = format!("rpc error: code = {:?} desc = {reason}", reason.code());
        Some(WatchResponse {
            watch_id: -1,
            created: true,
            canceled: true,
            cancel_reason,
            ..Default::default()
        })
    }

    fn create(&mut self, create: WatchCreateRequest) -> Option<(WatchResponse, Option<Register>)> {
        let watch_id = if create.watch_id != 0 {
            if self.ids.contains(&create.watch_id) {
                return Some((
                    WatchResponse {
                        watch_id: create.watch_id,
                        created: true,
                        canceled: true,
                        cancel_reason: "mvcc: duplicate watch ID provided on the WatchStream"
                            .into(),
                        ..Default::default()
                    },
                    None,
                ));
            }
            create.watch_id
        } else {
            while self.ids.contains(&self.next_id) {
                self.next_id += 1;
            }
            self.next_id
        };
        self.ids.insert(watch_id);
        let created = WatchResponse {
            watch_id,
            created: true,
            ..Default::default()
        };
        // The watcher is registered only after `created` is queued, so no
        // event can overtake it.
        let register: Register = Box::new(move |session: &mut Session| {
            let filter = WatchFilter {
                range: KeyRange::new(&create.key, &create.range_end),
                no_put: create.filters.contains(&(FilterType::Noput as i32)),
                no_delete: create.filters.contains(&(FilterType::Nodelete as i32)),
                prev_kv: create.prev_kv,
            };
            session.ctx.hub.register(
                (session.stream_id, watch_id),
                filter,
                create.start_revision,
                create.progress_notify,
                session.tx.clone(),
            );
        });
        Some((created, Some(register)))
    }

    fn cancel(&mut self, watch_id: i64) -> Option<(WatchResponse, Option<Register>)> {
        if !self.ids.remove(&watch_id) {
            return None;
        }
        self.ctx.hub.cancel((self.stream_id, watch_id));
        let canceled = WatchResponse {
            watch_id,
            canceled: true,
            ..Default::default()
        };
        Some((canceled, None))
    }

    /// Answers a progress request once every watcher of the stream is
    /// caught up; the header revision then says all events up to it were
    /// sent. While some watcher is still replaying history the answer waits
    /// (in the background, polling) rather than being dropped.
    fn progress(&mut self) -> Option<(WatchResponse, Option<Register>)> {
        let progress = |ctx: &Context, revision: i64| WatchResponse {
            watch_id: -1,
            header: Some(ctx.header(revision)),
            ..Default::default()
        };
        if let Some(revision) = self.ctx.hub.progress(self.stream_id) {
            return Some((progress(&self.ctx, revision), None));
        }
        let (ctx, tx, stream_id) = (self.ctx.clone(), self.tx.clone(), self.stream_id);
        tokio::spawn(async move {
            for _ in 0..PROGRESS_POLLS {
                tokio::time::sleep(PROGRESS_POLL_INTERVAL).await;
                if let Some(revision) = ctx.hub.progress(stream_id) {
                    let _ = tx.send(progress(&ctx, revision)).await;
                    return;
                }
            }
        });
        None
    }
}

/// A deferred progress answer is retried this often, this many times.
const PROGRESS_POLL_INTERVAL: std::time::Duration = std::time::Duration::from_millis(20);
const PROGRESS_POLLS: usize = 500;

type Register = Box<dyn FnOnce(&mut Session) + Send>;
