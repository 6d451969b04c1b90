//! The members under test: `capstan-store`, or etcd 3.4 with
//! `CAPSTAN_TEST_SERVER=etcd`, started with the same (etcd's) flags, on
//! plain HTTP or with TLS and `--client-cert-auth`; one or several
//! members. Each is reached with etcdctl as some identity: a password
//! user, or a client certificate whose common name is the user.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use capstan_tests::certs::{Authority, Pair};
use capstan_tests::etcdctl::{etcdctl, Run};
use capstan_tests::poll::wait_for;
use capstan_tests::store::on_reference_etcd;
use capstan_tests::watchdog::{self, Watchdog};
use capstan_tests::{binary, free_port};

pub const ROOT_PASSWORD: &str = "root-pw";
const PATIENCE: Duration = Duration::from_secs(30);

/// How a request identifies itself.
#[derive(Clone, Copy)]
pub enum As<'a> {
    /// No password and, over TLS, a certificate whose CN is no user.
    Anonymous,
    /// `--user name:password`.
    User(&'a str, &'a str),
    /// Over TLS, only a client certificate with this common name.
    Certificate(&'a str),
}

pub const ROOT: As = As::User("root", ROOT_PASSWORD);

/// The certificates of a TLS run: a CA, the members' certificate, and
/// client certificates named by their common name.
pub struct Tls {
    dir: PathBuf,
    authority: Authority,
    ca: PathBuf,
    member: Pair,
}

impl Tls {
    fn new(dir: &Path) -> Tls {
        let authority = Authority::new(dir, "store-ca");
        let member = authority.server(dir, "member");
        Tls {
            dir: dir.to_path_buf(),
            ca: authority.cert_file.clone(),
            authority,
            member,
        }
    }

    /// A client certificate with common name `cn` (made the first time
    /// it is asked for).
    pub fn client(&self, cn: &str) -> Pair {
        let made = Pair {
            cert_file: self.dir.join(format!("{cn}.crt")),
            key_file: self.dir.join(format!("{cn}.key")),
        };
        match made.cert_file.exists() {
            true => made,
            false => self.authority.client(&self.dir, cn),
        }
    }

    /// The CA the members' certificates are signed by.
    pub fn ca(&self) -> &Path {
        &self.ca
    }

    /// etcdctl's flags for a client certificate with common name `cn`.
    fn client_flags(&self, cn: &str) -> Vec<String> {
        let pair = self.client(cn);
        vec![
            format!("--cacert={}", self.ca.display()),
            format!("--cert={}", pair.cert_file.display()),
            format!("--key={}", pair.key_file.display()),
        ]
    }

    fn member_flags(&self) -> Vec<String> {
        let (cert, key, ca) = (
            self.member.cert_file.display(),
            self.member.key_file.display(),
            self.ca.display(),
        );
        vec![
            format!("--cert-file={cert}"),
            format!("--key-file={key}"),
            format!("--trusted-ca-file={ca}"),
            "--client-cert-auth".into(),
            format!("--peer-cert-file={cert}"),
            format!("--peer-key-file={key}"),
            format!("--peer-trusted-ca-file={ca}"),
            "--peer-client-cert-auth".into(),
        ]
    }
}

pub struct Member {
    pub name: String,
    pub client_port: u16,
    pub peer_port: u16,
    pub data_dir: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
}

impl Member {
    fn start(&mut self) {
        let program = if on_reference_etcd() {
            PathBuf::from("etcd")
        } else {
            binary("capstan-store")
        };
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("member log");
        let child = Command::new(program)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start a member");
        watchdog::track(child.id());
        self.child = Some(child);
    }

    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            watchdog::untrack(child.id());
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn assert_running(&mut self) {
        let child = self.child.as_mut().expect("started");
        if let Some(status) = child.try_wait().expect("poll the member") {
            panic!("member {} exited ({status}):\n{}", self.name, self.log());
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.kill9();
    }
}

pub struct Members {
    pub members: Vec<Member>,
    pub tls: Option<Tls>,
    scheme: &'static str,
    // Last: the folder goes once the members are killed.
    _watchdog: Watchdog,
    pub dir: tempfile::TempDir,
}

impl Members {
    /// `size` members on plain HTTP, with `extra` flags each.
    pub fn start(size: usize, extra: &[&str]) -> Members {
        Members::launch(size, extra, false)
    }

    /// `size` members with TLS on both ports and `--client-cert-auth`.
    pub fn start_tls(size: usize, extra: &[&str]) -> Members {
        Members::launch(size, extra, true)
    }

    fn launch(size: usize, extra: &[&str], tls: bool) -> Members {
        let dir = tempfile::tempdir().expect("a folder for the members");
        let tls = tls.then(|| Tls::new(dir.path()));
        let scheme = if tls.is_some() { "https" } else { "http" };
        let ports: Vec<(u16, u16)> = (0..size).map(|_| (free_port(), free_port())).collect();
        let initial: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{i}={scheme}://127.0.0.1:{peer}"))
            .collect();
        let members = ports
            .iter()
            .enumerate()
            .map(|(i, &(client_port, peer_port))| {
                let name = format!("m{i}");
                let data_dir = dir.path().join(&name);
                let client = format!("{scheme}://127.0.0.1:{client_port}");
                let peer = format!("{scheme}://127.0.0.1:{peer_port}");
                let mut args: Vec<String> = [
                    ("--name", name.clone()),
                    ("--data-dir", data_dir.display().to_string()),
                    ("--listen-client-urls", client.clone()),
                    ("--advertise-client-urls", client),
                    ("--listen-peer-urls", peer.clone()),
                    ("--initial-advertise-peer-urls", peer),
                    ("--initial-cluster", initial.join(",")),
                ]
                .into_iter()
                .map(|(flag, value)| format!("{flag}={value}"))
                .collect();
                args.extend(tls.iter().flat_map(Tls::member_flags));
                args.extend(extra.iter().map(|s| s.to_string()));
                Member {
                    log: dir.path().join(format!("{name}.log")),
                    name,
                    client_port,
                    peer_port,
                    data_dir,
                    args,
                    child: None,
                }
            })
            .collect();
        let mut members = Members {
            members,
            tls,
            scheme,
            _watchdog: watchdog::arm(),
            dir,
        };
        members.members.iter_mut().for_each(Member::start);
        (0..size).for_each(|i| members.wait_healthy(i));
        members
    }

    pub fn url(&self, i: usize) -> String {
        format!(
            "{}://127.0.0.1:{}",
            self.scheme, self.members[i].client_port
        )
    }

    /// What etcdctl is given: host and port. (etcdctl dials a URL with its
    /// scheme for `endpoint status` and `defrag` as the HTTP/2 authority,
    /// which only etcd's Go server lets through.)
    pub fn endpoint(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.members[i].client_port)
    }

    /// Which member leads, as `endpoint status` says.
    pub fn leader_index(&self) -> Option<usize> {
        (0..self.members.len()).find(|&i| {
            let run = self.etcdctl(i, ROOT, &["endpoint", "status", "-w", "json"]);
            let status: serde_json::Value = serde_json::from_str(&run.stdout).unwrap_or_default();
            let header = &status[0]["Status"]["header"];
            header["member_id"].as_u64().is_some()
                && header["member_id"] == status[0]["Status"]["leader"]
        })
    }

    /// Kills member `i` and starts it again on its data.
    pub fn restart(&mut self, i: usize) {
        self.members[i].kill9();
        self.members[i].start();
        self.wait_healthy(i);
    }

    /// Waits until member `i` answers a linearizable read as root (which
    /// works before auth is on too: the login is then skipped).
    pub fn wait_healthy(&mut self, i: usize) {
        let what = format!("member {i} to serve");
        wait_for(PATIENCE, &what, || {
            self.members[i].assert_running();
            let run = self.etcdctl(i, ROOT, &["endpoint", "health"]);
            run.ok.then_some(())
        });
    }

    /// etcdctl against member `i` as `who`.
    pub fn etcdctl(&self, i: usize, who: As, args: &[&str]) -> Run {
        self.etcdctl_with(i, who, args, None)
    }

    /// etcdctl against member `i` as `who`, reading `stdin`.
    pub fn etcdctl_with(&self, i: usize, who: As, args: &[&str], stdin: Option<&str>) -> Run {
        let mut flags = vec![
            "--dial-timeout=3s".to_string(),
            "--command-timeout=10s".to_string(),
        ];
        let cn = match who {
            As::Anonymous => "nobody",
            As::User(name, password) => {
                flags.push(format!("--user={name}:{password}"));
                "nobody"
            }
            As::Certificate(cn) => cn,
        };
        if let Some(tls) = &self.tls {
            flags.extend(tls.client_flags(cn));
        }
        flags.extend(args.iter().map(|s| s.to_string()));
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        etcdctl(&self.endpoint(i), &flags, stdin)
    }

    /// Like [`Members::etcdctl`], but it must succeed; returns stdout.
    pub fn ok(&self, i: usize, who: As, args: &[&str]) -> String {
        let run = self.etcdctl(i, who, args);
        assert!(
            run.ok,
            "etcdctl {args:?} failed: {}{}",
            run.stdout, run.stderr
        );
        run.stdout
    }

    /// Like [`Members::etcdctl`], but it must fail; returns stderr.
    pub fn refused(&self, i: usize, who: As, args: &[&str]) -> String {
        let run = self.etcdctl(i, who, args);
        assert!(
            !run.ok,
            "etcdctl {args:?} should fail, yet printed: {}",
            run.stdout
        );
        run.stderr
    }

    /// [`app_user_steps`] on the first member.
    pub fn set_up_app_user_and_enable(&self) {
        for args in app_user_steps() {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            self.ok(0, As::Anonymous, &args);
        }
    }
}

/// etcd's documented steps, as etcdctl arguments: root, a user `app`
/// (password `app-pw`) whose role reads and writes the prefix `/app/`
/// only, and auth on (etcdctl makes the `root` role and grants it).
pub fn app_user_steps() -> Vec<Vec<String>> {
    let steps: [&[&str]; 6] = [
        &["user", "add", &format!("root:{ROOT_PASSWORD}")],
        &["user", "add", "app:app-pw"],
        &["role", "add", "app-role"],
        &[
            "role",
            "grant-permission",
            "--prefix",
            "app-role",
            "readwrite",
            "/app/",
        ],
        &["user", "grant-role", "app", "app-role"],
        &["auth", "enable"],
    ];
    steps
        .iter()
        .map(|args| args.iter().map(|arg| arg.to_string()).collect())
        .collect()
}
