//! `etcdctl watch` run as a long-lived child process whose output is read
//! while the test writes.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::poll::wait_for;

/// A running `etcdctl watch`; killed when dropped.
pub struct WatchProcess {
    child: Child,
    stdout: Arc<Mutex<Vec<String>>>,
    readers: Option<(JoinHandle<()>, JoinHandle<String>)>,
}

impl WatchProcess {
    /// Starts `etcdctl --endpoints <endpoint> watch args...`.
    pub fn spawn(endpoint: &str, args: &[&str]) -> WatchProcess {
        let mut child = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={endpoint}"))
            .arg("watch")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("etcdctl is installed");
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let lines = stdout.clone();
        let out = child.stdout.take().expect("stdout piped");
        let stdout_reader = std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                lines.lock().unwrap().push(line);
            }
        });
        let mut err = child.stderr.take().expect("stderr piped");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            text
        });
        WatchProcess {
            child,
            stdout,
            readers: Some((stdout_reader, stderr)),
        }
    }

    /// The stdout lines read so far.
    pub fn lines(&self) -> Vec<String> {
        self.stdout.lock().unwrap().clone()
    }

    /// Waits until at least `count` stdout lines arrived; returns all of them.
    pub fn wait_for_lines(&self, count: usize, timeout: Duration) -> Vec<String> {
        wait_for(
            timeout,
            &format!("{count} lines of etcdctl watch output"),
            || {
                let lines = self.lines();
                (lines.len() >= count).then_some(lines)
            },
        )
    }

    /// Waits for the process to exit by itself and for all of its output;
    /// returns its status and stderr.
    pub fn wait_for_exit(&mut self, timeout: Duration) -> (ExitStatus, String) {
        let status = wait_for(timeout, "etcdctl watch to exit", || {
            self.child.try_wait().expect("poll etcdctl")
        });
        let (stdout, stderr) = self.readers.take().expect("wait_for_exit is called once");
        let _ = stdout.join();
        (status, stderr.join().unwrap_or_default())
    }
}

impl Drop for WatchProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
