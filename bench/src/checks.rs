//! The ledger of correctness checks made during a run. Every check is
//! printed when it fails; the run ends with `N passed, M failed`.

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

#[derive(Debug, Default)]
pub struct Checks {
    checks: Vec<Check>,
    quiet: bool,
}

impl Checks {
    pub fn new(quiet: bool) -> Self {
        Checks {
            checks: Vec::new(),
            quiet,
        }
    }

    /// Records a check. Failures always go to stderr at once; passes only
    /// when not quiet.
    pub fn record(
        &mut self,
        name: impl Into<String>,
        passed: bool,
        detail: impl Into<String>,
    ) -> bool {
        let check = Check {
            name: name.into(),
            passed,
            detail: detail.into(),
        };
        if !passed {
            eprintln!("FAILED check: {}: {}", check.name, check.detail);
        } else if !self.quiet {
            eprintln!("  ok: {}: {}", check.name, check.detail);
        }
        self.checks.push(check);
        passed
    }

    pub fn passed(&self) -> usize {
        self.checks.iter().filter(|c| c.passed).count()
    }

    pub fn failed(&self) -> usize {
        self.checks.len() - self.passed()
    }

    pub fn failures(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.passed)
    }

    pub fn all(&self) -> &[Check] {
        &self.checks
    }
}
