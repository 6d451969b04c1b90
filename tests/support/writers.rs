//! Clients and writers for the cluster tests: puts of distinct keys from
//! several tasks while members are killed or paused, each answer recorded
//! and each failure classified.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions};
use tokio::sync::Mutex;

pub async fn connect(urls: &[String]) -> Client {
    connect_with_timeout(urls, Duration::from_secs(10)).await
}

pub async fn connect_with_timeout(urls: &[String], timeout: Duration) -> Client {
    let options = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_timeout(timeout);
    Client::connect(urls, Some(with_store_tls(options, urls)))
        .await
        .expect("connect")
}

/// Adds the store client certificate when the members at `urls` serve TLS
/// (their ports were registered with their certificates).
fn with_store_tls(options: ConnectOptions, urls: &[String]) -> ConnectOptions {
    let port = |url: &String| url.rsplit(':').next()?.parse::<u16>().ok();
    let pki = urls
        .iter()
        .filter(|url| url.starts_with("https://"))
        .find_map(|url| super::tls::store_pki_of(port(url)?));
    match pki {
        Some(pki) => options.with_tls(super::tls::store_tls_options(&pki)),
        None => options,
    }
}

/// Keys and revisions of acknowledged puts, and keys whose put failed.
#[derive(Default)]
pub struct History {
    /// Key, revision, and when the put was sent and answered.
    pub acked: Vec<(String, i64, Instant, Instant)>,
    /// Keys whose put failed, with the error and its class.
    pub failed: Vec<(String, String, &'static str)>,
    /// Failures by class, for the report.
    pub classes: HashMap<&'static str, usize>,
    /// Failures no member kill or pause explains (see [`classify`]).
    pub unexpected: Vec<(String, String)>,
}

impl History {
    pub fn fail(&mut self, key: String, err: &etcd_client::Error) {
        let class = classify(err);
        *self.classes.entry(class).or_default() += 1;
        if class == "unexpected" {
            self.unexpected.push((key.clone(), err.to_string()));
        }
        self.failed.push((key, err.to_string(), class));
    }

    /// Some puts were acknowledged, and every failure is one that killing
    /// or pausing a member explains; panics with the counts otherwise.
    pub fn check_failures(&self, what: &str) {
        assert!(
            !self.acked.is_empty(),
            "{what}: no put was acknowledged (failures {:?})",
            self.classes
        );
        assert!(
            self.unexpected.is_empty(),
            "{what}: {} acknowledged, failures {:?}, unexpected: {:?}",
            self.acked.len(),
            self.classes,
            self.unexpected
        );
    }
}

/// A failed put, read as a client of a cluster losing a member must:
/// "leader changed" (the entry was overwritten) and a refused connection
/// (the put never left the client) are definite failures; unavailability,
/// a time-out, or a connection cut by the kill leave the outcome unknown;
/// anything else (a refused argument, an internal error) is a bug.
pub fn classify(err: &etcd_client::Error) -> &'static str {
    use etcd_client::Error;
    use tonic::Code;
    match err {
        Error::GRpcStatus(status)
            if status.message().contains("leader changed")
                || status.message().contains("Connection refused") =>
        {
            "definite"
        }
        Error::GRpcStatus(status) => match status.code() {
            Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled => "ambiguous",
            // A connection reset mid-call surfaces as Unknown in tonic.
            Code::Unknown if status.message().contains("transport") => "ambiguous",
            _ => "unexpected",
        },
        Error::TransportError(_) | Error::IoError(_) => "ambiguous",
        _ => "unexpected",
    }
}

/// Writers putting distinct keys `prefix-<writer>-<n>` until `stop`.
pub fn spawn_writers(
    urls: Vec<String>,
    writers: usize,
    prefix: &str,
    stop: Arc<AtomicBool>,
    history: Arc<Mutex<History>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..writers)
        .map(|w| {
            let (urls, stop, history) = (urls.clone(), stop.clone(), history.clone());
            let prefix = prefix.to_string();
            tokio::spawn(async move {
                // A put forwarded to a leader that just died hangs until the
                // server's 7 s timeout; like an impatient client, give up
                // sooner (an unknown outcome) and carry on with a new key.
                let mut client = connect_with_timeout(&urls, Duration::from_secs(2)).await;
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("{prefix}-{w}-{n}");
                    n += 1;
                    let sent = Instant::now();
                    match client.put(key.clone(), "v", None).await {
                        Ok(resp) => {
                            let rev = resp.header().expect("header").revision();
                            let answered = Instant::now();
                            history.lock().await.acked.push((key, rev, sent, answered));
                        }
                        Err(err) => {
                            history.lock().await.fail(key, &err);
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                }
            })
        })
        .collect()
}

/// Puts `key`, retrying while the cluster answers Unavailable (a member
/// that forwarded to a leader which just died times out, as etcd does, and
/// clients retry). Returns the revision.
pub async fn put_until_ok(client: &mut Client, key: &str, limit: Duration) -> i64 {
    let deadline = Instant::now() + limit;
    loop {
        match client.put(key, "v", None).await {
            Ok(resp) => return resp.header().unwrap().revision(),
            Err(err) => {
                assert!(
                    Instant::now() < deadline,
                    "no write within {limit:?}: {err}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Waits (up to `limit`) until `history` holds `count` acknowledged puts;
/// how long that took.
pub async fn wait_acked(history: &Mutex<History>, count: usize, limit: Duration) -> Duration {
    let what = format!("{count} acknowledged puts");
    wait_until(&what, limit, || async {
        history.lock().await.acked.len() >= count
    })
    .await
}

/// Waits (up to `limit`) until a put sent after `since` was acknowledged:
/// writes resumed. Returns the time from `since` to its answer.
pub async fn wait_resumed(history: &Mutex<History>, since: Instant, limit: Duration) -> Duration {
    let what = "a put sent after the fault to be acknowledged";
    wait_until(what, limit, || async {
        history.lock().await.acked.iter().any(|a| a.2 > since)
    })
    .await;
    let history = history.lock().await;
    let first = history.acked.iter().filter(|a| a.2 > since).map(|a| a.3);
    first.min().expect("a put after the fault") - since
}

/// Waits (up to `limit`) until `count` puts have failed.
pub async fn wait_failed(history: &Mutex<History>, count: usize, limit: Duration) -> Duration {
    let what = format!("{count} failed puts");
    wait_until(&what, limit, || async {
        history.lock().await.failed.len() >= count
    })
    .await
}

async fn wait_until<F, Fut>(what: &str, limit: Duration, mut done: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    super::poll::wait_for_async(limit, what, || {
        let check = done();
        async move { check.await.then_some(()) }
    })
    .await;
    started.elapsed()
}

/// Waits until every listed member reports the same revision and hash.
pub async fn wait_converged(urls: &[String], limit: Duration) -> i64 {
    let deadline = Instant::now() + limit;
    loop {
        let mut seen = Vec::new();
        for url in urls {
            let mut client = connect(std::slice::from_ref(url)).await;
            if let Ok(resp) = client.hash_kv(0).await {
                seen.push((resp.header().unwrap().revision(), resp.hash()));
            }
        }
        if seen.len() == urls.len() && seen.windows(2).all(|w| w[0] == w[1]) {
            return seen[0].0;
        }
        assert!(
            Instant::now() < deadline,
            "members did not converge: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
