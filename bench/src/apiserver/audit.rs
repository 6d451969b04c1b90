//! The audit variant (`--api-audit-level LEVEL`): every API server
//! audits every request at LEVEL (one rule) to a log file in its own
//! folder, so the timed requests pay for building and queueing events
//! and the log writer competes for the same cores.

use std::path::Path;
use std::sync::OnceLock;

static LEVEL: OnceLock<String> = OnceLock::new();

/// Turns the variant on for the rest of the run.
pub fn enable(level: &str) {
    let _ = LEVEL.set(level.to_string());
}

/// The API server flags of the variant (none when it is off); writes
/// the policy in `dir`.
pub fn flags(dir: &Path) -> std::io::Result<Vec<String>> {
    let Some(level) = LEVEL.get() else {
        return Ok(Vec::new());
    };
    let policy = dir.join("audit-policy.yaml");
    std::fs::write(
        &policy,
        format!("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n  - level: {level}\n"),
    )?;
    Ok(vec![
        "--audit-policy-file".into(),
        policy.display().to_string(),
        "--audit-log-path".into(),
        dir.join("audit.log").display().to_string(),
    ])
}
