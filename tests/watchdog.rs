//! The per-test watchdog really ends a hung test: this test runs its own
//! binary again with a 2 s budget on a test that hangs, and expects a
//! failure that names the test and what it was waiting for.

use std::process::Command;
use std::time::Duration;

use capstan_tests::watchdog;

/// Hangs: the subject of the test below, which runs it explicitly.
#[test]
#[ignore = "hangs on purpose; run by a_test_past_its_budget_fails_naming_its_wait"]
fn hangs_when_asked() {
    let _armed = watchdog::arm();
    watchdog::waiting_for("an answer that never comes");
    std::thread::sleep(Duration::from_secs(600));
}

#[test]
fn a_test_past_its_budget_fails_naming_its_wait() {
    let output = Command::new(std::env::current_exe().expect("the test binary"))
        .args(["hangs_when_asked", "--exact", "--ignored", "--nocapture"])
        .env("CAPSTAN_TEST_BUDGET_SECS", "2")
        .output()
        .expect("run the test binary again");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "the hung test must fail: {stderr}"
    );
    assert!(
        stderr.contains("test `hangs_when_asked` is still running")
            && stderr.contains("waiting for: an answer that never comes"),
        "{stderr}"
    );
}
