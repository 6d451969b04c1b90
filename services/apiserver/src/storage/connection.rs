//! The connection to the store's members: one lazily connected client per
//! listed endpoint, used one at a time, moving on to the next when the
//! current one cannot be reached.
//!
//! etcd-client's own client balances over every endpoint and hands the
//! caller whatever error the member it picked gave, so with one member
//! down a third of the requests fail; its `connect` also insists that the
//! store answers. Here each endpoint has its own client (creating one
//! sends nothing), a request goes to the member that answered last, and
//! a failure to reach it moves the request, and the ones after it, to the
//! next member. Attempts and the whole request are bounded in time, so a
//! store with no member answering is an error, never a hang.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions, WatchOptions, WatchResponse};
use futures::{Stream, StreamExt};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

use super::kv::KvClient;
use super::StorageError;

/// How long one member may take over one request before the next is
/// tried (a linearizable read on a member that lost its leader waits for
/// an election, which takes about a second).
const ATTEMPT: Duration = Duration::from_secs(4);
/// How long one request may take over all its attempts.
const BUDGET: Duration = Duration::from_secs(10);
/// The pause before going round the members again.
const BACKOFF: Duration = Duration::from_millis(300);
/// A member that does not accept a TCP connection within this is down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// HTTP/2 pings, kube-apiserver's: a member that stops answering them
/// (hung, or its host gone) breaks the watch streams on it instead of
/// leaving them silent. Not more often, and not while idle: etcd answers
/// pings more frequent than every 5 s, or on a connection without
/// streams, by closing the connection.
const KEEP_ALIVE: Duration = Duration::from_secs(30);
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// gRPC status codes (grpc/status.proto) that say the transport failed,
/// not the store: Cancelled, Unknown, DeadlineExceeded, Internal,
/// Unavailable.
const TRANSPORT_CODES: [i32; 5] = [1, 2, 4, 13, 14];
const UNAVAILABLE: i32 = 14;

/// Whether a request may be sent again after a failure that leaves
/// unknown whether the store applied it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Call {
    /// Reads: sending one twice is harmless.
    Read,
    /// Writes: sent again only when the first attempt never left.
    Write,
}

/// What a failed attempt says about the request.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Failure {
    /// The store answered; the error is its answer (compacted, ...).
    Answer,
    /// The member could not be reached: nothing was sent.
    Unreached,
    /// The member was reached, or may have been, and then the transport
    /// failed: a write may or may not have been applied.
    Unknown,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreCallLabels {
    /// `read` or `write`.
    pub call: &'static str,
    /// `ok`, or `error` (whatever the store or the transport said).
    pub outcome: &'static str,
}

/// What the connection measures, for `/metrics`.
#[derive(Clone)]
pub struct StoreMetrics {
    /// Time of whole requests, over all their attempts.
    pub latency: Family<StoreCallLabels, Histogram>,
    /// Attempts that moved on to another member.
    pub failovers: Counter,
}

impl Default for StoreMetrics {
    fn default() -> Self {
        StoreMetrics {
            latency: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.0002, 2.0, 16))
            }),
            failovers: Counter::default(),
        }
    }
}

#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

struct Inner {
    members: Vec<Member>,
    /// The member that answered last: requests go there first.
    current: AtomicUsize,
    metrics: StoreMetrics,
}

struct Member {
    url: String,
    client: Client,
    /// The member's KV API: the client's, or a direct path into the
    /// store in this process.
    kv: KvClient,
}

/// The store this process embeds, as it hands itself over: a channel for
/// what goes through etcd-client (watches, leases, compaction) and its KV
/// service for reads and writes, called directly.
pub struct InProcessStore {
    pub channel: etcd_client::Channel,
    pub kv: Arc<dyn capstan_proto::etcdserverpb::kv_server::Kv>,
}

impl Connection {
    /// A client per endpoint; nothing is sent until the first request, so
    /// this works while members are down.
    pub async fn new(urls: &[String]) -> Result<Connection, StorageError> {
        Connection::with_tls(urls, None).await
    }

    /// As [`Connection::new`], over TLS when `tls` is given.
    pub async fn with_tls(
        urls: &[String],
        tls: Option<etcd_client::TlsOptions>,
    ) -> Result<Connection, StorageError> {
        let mut options = ConnectOptions::new()
            .with_connect_timeout(CONNECT_TIMEOUT)
            .with_keep_alive(KEEP_ALIVE, KEEP_ALIVE_TIMEOUT)
            .with_keep_alive_while_idle(false)
            // A member cut off from the others refuses us and ends our
            // watches ("no leader"), so we move to one that can see the
            // cluster instead of waiting on a silent stream.
            .with_require_leader(true);
        if let Some(tls) = tls {
            options = options.with_tls(tls);
        }
        let mut members = Vec::new();
        for url in urls {
            let client = Client::connect([url.as_str()], Some(options.clone()))
                .await
                .map_err(|e| StorageError::Unavailable(format!("endpoint {url}: {e}")))?;
            members.push(Member {
                url: url.clone(),
                kv: KvClient::Remote(Box::new(client.kv_client())),
                client,
            });
        }
        if members.is_empty() {
            return Err(StorageError::Unavailable("no store endpoints given".into()));
        }
        Ok(Connection::of(members))
    }

    /// One member: the store in this process, reached as it hands itself
    /// over (no socket); `name` stands for it in errors.
    pub async fn in_process(name: &str, store: InProcessStore) -> Result<Connection, StorageError> {
        let options = ConnectOptions::new().with_require_leader(true);
        let client = Client::from_channel(store.channel, Some(options))
            .await
            .map_err(|e| StorageError::Unavailable(format!("{name}: {e}")))?;
        let member = Member {
            url: name.to_string(),
            client,
            kv: KvClient::InProcess(store.kv),
        };
        Ok(Connection::of(vec![member]))
    }

    fn of(members: Vec<Member>) -> Connection {
        Connection {
            inner: Arc::new(Inner {
                members,
                current: AtomicUsize::new(0),
                metrics: StoreMetrics::default(),
            }),
        }
    }

    pub fn metrics(&self) -> &StoreMetrics {
        &self.inner.metrics
    }

    /// Sends what `op` makes of a member's client until a member answers
    /// (see [`Call`] for when a request is sent again).
    pub async fn unary<T, F, Fut>(&self, call: Call, op: F) -> Result<T, StorageError>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        self.measured(call, |member| op(member.client.clone()))
            .await
    }

    /// As [`Connection::unary`], with a member's KV API: the path reads
    /// and writes take.
    pub async fn kv<T, F, Fut>(&self, call: Call, op: F) -> Result<T, StorageError>
    where
        F: Fn(KvClient) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        self.measured(call, |member| op(member.kv.clone())).await
    }

    /// Runs `op` as [`Connection::attempts`] does, timing the request.
    async fn measured<T, F, Fut>(&self, call: Call, op: F) -> Result<T, StorageError>
    where
        F: Fn(&Member) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let started = Instant::now();
        let result = self.attempts(call, op).await;
        let labels = StoreCallLabels {
            call: match call {
                Call::Read => "read",
                Call::Write => "write",
            },
            outcome: if result.is_ok() { "ok" } else { "error" },
        };
        self.inner
            .metrics
            .latency
            .get_or_create(&labels)
            .observe(started.elapsed().as_secs_f64());
        result
    }

    /// The endpoint requests go to first.
    pub fn current_url(&self) -> &str {
        &self.inner.members[self.current()].url
    }

    fn current(&self) -> usize {
        self.inner.current.load(Ordering::Relaxed) % self.inner.members.len()
    }

    /// Runs `op` on the current member, moving on to the others when it
    /// cannot be reached (and, for reads, when the transport fails), round
    /// after round until [`BUDGET`] is spent.
    async fn attempts<T, F, Fut>(&self, call: Call, op: F) -> Result<T, StorageError>
    where
        F: Fn(&Member) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let deadline = Instant::now() + BUDGET;
        let mut failures = Vec::new();
        loop {
            let start = self.current();
            for step in 0..self.inner.members.len() {
                let index = (start + step) % self.inner.members.len();
                let member = &self.inner.members[index];
                let left = deadline.saturating_duration_since(Instant::now());
                let attempt = tokio::time::timeout(left.min(ATTEMPT), op(member));
                let err = match attempt.await {
                    Ok(Ok(value)) => {
                        self.inner.current.store(index, Ordering::Relaxed);
                        return Ok(value);
                    }
                    Ok(Err(err)) => err,
                    Err(_) if call == Call::Write => {
                        return Err(ambiguous(&member.url, "no answer in time"))
                    }
                    Err(_) => {
                        failures.push(format!("{}: no answer in time", member.url));
                        continue;
                    }
                };
                match (classify(&err), call) {
                    (Failure::Answer, _) => return Err(StorageError::from(err)),
                    (Failure::Unknown, Call::Write) => {
                        return Err(ambiguous(&member.url, &err.to_string()))
                    }
                    (Failure::Unreached, _) | (Failure::Unknown, Call::Read) => {
                        tracing::debug!(endpoint = %member.url, %err, "store member failed; trying the next");
                        self.inner.metrics.failovers.inc();
                        failures.push(format!("{}: {err}", member.url));
                    }
                }
                if Instant::now() >= deadline {
                    break;
                }
            }
            if Instant::now() + BACKOFF >= deadline {
                return Err(unanswered(&failures));
            }
            tokio::time::sleep(BACKOFF).await;
        }
    }

    /// Opens a watch of every key under `prefix` from revision `from` on
    /// the first member that confirms it (its first response), so a dead
    /// member is passed over here rather than found out later.
    pub async fn watch(&self, prefix: &str, from: i64) -> Result<StoreWatch, StorageError> {
        let options = WatchOptions::new()
            .with_prefix()
            .with_prev_key()
            .with_progress_notify()
            .with_start_revision(from);
        let prefix = prefix.to_string();
        let opened = self
            .unary(Call::Read, |client| {
                let (prefix, options) = (prefix.clone(), options.clone());
                async move {
                    let mut stream = client.watch_client().watch(prefix, Some(options)).await?;
                    let first = stream.message().await?.ok_or_else(|| {
                        etcd_client::Error::WatchError("the watch ended at once".into())
                    })?;
                    Ok((first, stream))
                }
            })
            .await?;
        let (first, stream) = opened;
        // The stream owns the request half too (dropping that cancels the
        // watch on the member), and ends after its first error: a broken
        // watch is opened anew.
        let rest = futures::stream::unfold(Some(stream), |stream| async move {
            let mut stream = stream?;
            match stream.message().await {
                Ok(Some(response)) => Some((Ok(response), Some(stream))),
                Ok(None) => None,
                Err(err) => Some((Err(err), None)),
            }
        });
        Ok(futures::stream::once(async move { Ok(first) })
            .chain(rest)
            .boxed())
    }
}

/// A store watch's responses, ending (or failing) when the member goes.
pub type StoreWatch =
    std::pin::Pin<Box<dyn Stream<Item = Result<WatchResponse, etcd_client::Error>> + Send>>;

fn ambiguous(url: &str, why: &str) -> StorageError {
    StorageError::Unavailable(format!(
        "the store member {url} failed during a write ({why}); \
         it may or may not have been applied"
    ))
}

fn unanswered(failures: &[String]) -> StorageError {
    let tail = failures.len().saturating_sub(6);
    StorageError::Unavailable(format!(
        "no store member answered within {}s: {}",
        BUDGET.as_secs(),
        failures[tail..].join("; ")
    ))
}

fn classify(err: &etcd_client::Error) -> Failure {
    match err {
        etcd_client::Error::GRpcStatus(status) => {
            let source = format!("{:?}", std::error::Error::source(status));
            classify_status(status.code() as i32, status.message(), &source)
        }
        etcd_client::Error::TransportError(_)
        | etcd_client::Error::IoError(_)
        | etcd_client::Error::WatchError(_) => Failure::Unknown,
        _ => Failure::Answer,
    }
}

/// A gRPC status by its code, message and the debug form of its source.
fn classify_status(code: i32, message: &str, source: &str) -> Failure {
    if !TRANSPORT_CODES.contains(&code) {
        return Failure::Answer;
    }
    // etcd's own errors come with an "etcdserver:" text: the member
    // answered (no leader, timed out, ...), which for a write is as
    // unknown as a broken connection.
    if message.starts_with("etcdserver:") {
        return Failure::Unknown;
    }
    let refused = message.contains("tcp connect error")
        || message.contains("error trying to connect")
        || source.contains("ConnectError")
        || source.contains("ConnectionRefused");
    match code == UNAVAILABLE && refused {
        true => Failure::Unreached,
        false => Failure::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_connections_are_unreached_and_store_answers_are_answers() {
        let refused = classify_status(UNAVAILABLE, "tcp connect error", "None");
        assert_eq!(refused, Failure::Unreached);
        let compacted = "etcdserver: mvcc: required revision has been compacted";
        assert_eq!(classify_status(11, compacted, "None"), Failure::Answer);
        let no_leader = classify_status(UNAVAILABLE, "etcdserver: no leader", "None");
        assert_eq!(no_leader, Failure::Unknown);
        let reset = classify_status(2, "h2 protocol error: connection reset", "None");
        assert_eq!(reset, Failure::Unknown);
        let source = "Some(tonic::transport::Error(Transport, ConnectError(..)))";
        assert_eq!(
            classify_status(UNAVAILABLE, "transport error", source),
            Failure::Unreached
        );
    }

    #[test]
    fn unanswered_names_the_last_failures() {
        let failures: Vec<String> = (0..8).map(|i| format!("m{i}: refused")).collect();
        let message = unanswered(&failures).to_string();
        assert!(message.contains("m7: refused") && !message.contains("m1: refused"));
    }
}
