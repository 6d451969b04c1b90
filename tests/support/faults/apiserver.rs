//! A `capstan-apiserver` that a fault schedule can kill with SIGKILL and
//! start again on the same port, so its clients and watchers come back to
//! it without being told.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::apiserver::secure_flags;
use crate::store::http_get;
use crate::{binary, free_port};

pub struct ApiProcess {
    pub port: u16,
    store_urls: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
}

impl ApiProcess {
    /// Starts an API server on the store at `store_urls` (in that order),
    /// logging to `<dir>/<name>.log`, and waits until it is ready.
    pub fn start(store_urls: &[String], dir: &Path, name: &str) -> ApiProcess {
        let mut api = ApiProcess {
            port: free_port(),
            store_urls: store_urls.to_vec(),
            log: dir.join(format!("{name}.log")),
            child: None,
        };
        api.spawn();
        api
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the API server runs").id()
    }

    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and waits until it is ready.
    pub fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open the API server log");
        let child = Command::new(binary("capstan-apiserver"))
            .args(["--etcd-servers", &self.store_urls.join(",")])
            .args(["--log-level", "warn"])
            .args(secure_flags(
                self.log.parent().expect("a folder"),
                self.port,
            ))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start capstan-apiserver");
        self.child = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if http_get(self.port, "/readyz").is_some() {
                return;
            }
            let child = self.child.as_mut().expect("started");
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "the API server exited ({status}); log:\n{}",
                    self.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "the API server was not ready within 60s; log:\n{}",
            self.log_text()
        );
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for ApiProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}
