//! `--quota-backend-bytes` and the NOSPACE alarm, driven with etcdctl 3.4:
//! past the quota, writes that grow the database are refused with etcd's
//! error and the alarm is raised; reads and deletes go on; `compact` and
//! `defrag` give the space back and `alarm disarm` lets writes through
//! again. Both tests also run against etcd 3.4 (`CAPSTAN_TEST_SERVER=etcd`),
//! the cluster one on three etcd members.

use std::time::Duration;

use capstan_tests::cluster::Cluster;
use capstan_tests::etcdctl::{etcdctl, etcdctl_err, etcdctl_json, etcdctl_ok};
use capstan_tests::poll::wait_for;
use capstan_tests::store::TempStore;

const NO_SPACE: &str = "etcdserver: mvcc: database space exceeded";
/// A quota of 4 MB, reached by a few dozen 64 KiB values.
const QUOTA: u64 = 4_000_000;
const VALUE_LEN: usize = 64 * 1024;

/// A value of `VALUE_LEN` bytes that does not compress.
fn incompressible(seed: usize) -> String {
    let mut state = (seed as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (0..VALUE_LEN)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(b'a' + (state % 26) as u8)
        })
        .collect()
}

/// Puts big values over ten keys until a put is refused; returns the
/// refusal's stderr.
fn fill_until_refused(ep: &str) -> String {
    for i in 0..1000 {
        let value = incompressible(i);
        let key = format!("big/{}", i % 10);
        let run = etcdctl(ep, &["put", &key], Some(&value));
        if !run.ok {
            return run.stderr;
        }
    }
    panic!("1,000 puts of {VALUE_LEN} bytes fit under a quota of {QUOTA} bytes");
}

/// The member's id, its database size and the errors its status lists.
fn status(ep: &str) -> (u64, u64, Vec<String>) {
    let answer = etcdctl_json(ep, &["endpoint", "status"]);
    let status = &answer[0]["Status"];
    let errors = status["errors"]
        .as_array()
        .map(|errors| {
            errors
                .iter()
                .map(|e| e.as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default();
    let member = status["header"]["member_id"].as_u64().expect("member id");
    (member, status["dbSize"].as_u64().expect("db size"), errors)
}

fn alarm_lines(ep: &str) -> Vec<String> {
    let out = etcdctl_ok(ep, &["alarm", "list"]);
    out.lines().map(|l| l.trim().to_string()).collect()
}

fn sorted(mut lines: Vec<String>) -> Vec<String> {
    lines.sort();
    lines
}

fn nospace_of(member: u64) -> String {
    format!("memberID:{member} alarm:NOSPACE")
}

/// The alarms `lines` lists (`on` a member or the cluster) are NOSPACE
/// alarms of `members`, each once.
fn only_nospace_alarms_once_each(lines: &[String], members: &[u64], on: &str) {
    let known: Vec<String> = members.iter().map(|&m| nospace_of(m)).collect();
    for line in lines {
        assert!(known.contains(line), "on {on}: {line} in {lines:?}");
        let times = lines.iter().filter(|l| *l == line).count();
        assert_eq!(times, 1, "on {on}: {line} listed {times} times");
    }
}

/// Every write that grows the database fails with NOSPACE.
fn growth_is_refused(ep: &str) {
    let put = etcdctl_err(ep, &["put", "small", "x"]);
    assert!(put.contains(NO_SPACE), "{put}");
    let grant = etcdctl_err(ep, &["lease", "grant", "100"]);
    assert!(grant.contains(NO_SPACE), "{grant}");
    let txn = etcdctl(ep, &["txn"], Some("\nput small x\n\n\n"));
    assert!(!txn.ok && txn.stderr.contains(NO_SPACE), "{}", txn.stderr);
}

#[test]
fn past_the_quota_writes_are_refused_until_compact_defrag_and_disarm() {
    let quota = QUOTA.to_string();
    let store = TempStore::start(&["--quota-backend-bytes", &quota]);
    let ep = store.endpoint();
    let refused = fill_until_refused(&ep);
    assert!(refused.contains(NO_SPACE), "{refused}");
    let (member, _, errors) = status(&ep);
    assert_eq!(alarm_lines(&ep), [nospace_of(member)]);
    assert_eq!(
        errors.iter().map(|e| e.trim()).collect::<Vec<_>>(),
        [nospace_of(member)]
    );
    growth_is_refused(&ep);

    // Reads, reads-only txns and deletes still work.
    assert_eq!(
        etcdctl_ok(&ep, &["get", "big/1", "--keys-only"]).trim(),
        "big/1"
    );
    let read_txn = etcdctl(&ep, &["txn"], Some("\nget big/1 --keys-only\n\n\n"));
    assert!(read_txn.ok, "{}", read_txn.stderr);
    assert_eq!(etcdctl_ok(&ep, &["del", "big/", "--prefix"]).trim(), "10");

    let revision = etcdctl_json(&ep, &["get", "big/1"])["header"]["revision"]
        .as_i64()
        .unwrap();
    etcdctl_ok(&ep, &["compact", &revision.to_string()]);
    etcdctl_ok(&ep, &["defrag"]);
    let (_, size, _) = status(&ep);
    assert!(size < QUOTA / 4, "defrag left {size} bytes");
    // The alarm stays until it is disarmed.
    growth_is_refused(&ep);
    let disarmed = etcdctl_ok(&ep, &["alarm", "disarm"]);
    assert_eq!(disarmed.trim(), nospace_of(member));
    assert!(alarm_lines(&ep).is_empty());
    assert!(status(&ep).2.is_empty());
    assert_eq!(etcdctl_ok(&ep, &["put", "small", "x"]).trim(), "OK");
    let lease = etcdctl_ok(&ep, &["lease", "grant", "100"]);
    assert!(lease.contains("granted"), "{lease}");
}

#[test]
fn the_alarm_is_replicated_so_every_member_refuses_and_it_survives_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let quota = QUOTA.to_string();
    let flags = ["--quota-backend-bytes", &quota];
    let mut cluster = Cluster::start_under_test(dir.path(), 3, &flags);
    let eps: Vec<String> = cluster.members.iter().map(|m| m.endpoint()).collect();
    let refused = fill_until_refused(&eps[0]);
    assert!(refused.contains(NO_SPACE), "{refused}");
    // Every member refuses on the alarm's account.
    for ep in &eps {
        growth_is_refused(ep);
    }
    // capstan raises NOSPACE on the first refusal; etcd also raises it as
    // it applies a write on every member whose own database is over the
    // quota and that knows no alarm yet, so several may race in. Either
    // way every member comes to list the same NOSPACE alarms of members.
    let members: Vec<u64> = eps.iter().map(|ep| status(ep).0).collect();
    let alarms = wait_for(
        Duration::from_secs(20),
        "the same alarms on every member",
        || {
            let lists: Vec<Vec<String>> = eps.iter().map(|ep| sorted(alarm_lines(ep))).collect();
            let same = lists.iter().all(|list| *list == lists[0]);
            (same && !lists[0].is_empty()).then(|| lists[0].clone())
        },
    );
    only_nospace_alarms_once_each(&alarms, &members, "the cluster");
    // A restarted member still holds the alarm.
    cluster.members[2].kill9();
    cluster.members[2].start();
    let restarted = &eps[2];
    wait_for(Duration::from_secs(20), "member 2 back", || {
        etcdctl(restarted, &["get", "big/1", "--keys-only"], None)
            .ok
            .then_some(())
    });
    growth_is_refused(restarted);
    assert_eq!(sorted(alarm_lines(restarted)), alarms);

    etcdctl_ok(&eps[1], &["del", "big/", "--prefix"]);
    let revision = etcdctl_json(&eps[1], &["get", "x"])["header"]["revision"]
        .as_i64()
        .unwrap();
    etcdctl_ok(&eps[1], &["compact", &revision.to_string()]);
    for ep in &eps {
        etcdctl_ok(ep, &["defrag"]);
    }
    let disarm = etcdctl_ok(&eps[1], &["alarm", "disarm"]);
    let disarmed: Vec<String> = disarm.lines().map(|l| l.trim().to_string()).collect();
    assert_eq!(sorted(disarmed), alarms);
    for ep in &eps {
        assert!(alarm_lines(ep).is_empty(), "on {ep}");
        assert_eq!(etcdctl_ok(ep, &["put", "small", "x"]).trim(), "OK");
    }
}
