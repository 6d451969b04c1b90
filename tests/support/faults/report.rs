//! The report of a fault run: operations, the faults that took effect
//! (and any that did not), failover times, notes and violations. A run
//! whose schedule advertised a kind of fault that never took effect has a
//! violation: it did not test what it says it tested.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::schedule::{FaultRecord, Faults};
use super::Network;
use crate::checker::verify::Findings;
use crate::history::{self, Operation};

/// For each fault that took the leader away: the time from injection to
/// the first acknowledged write that was sent after it.
pub fn failover_times(records: &[FaultRecord], ops: &[Operation]) -> Vec<Duration> {
    let mut acked: Vec<(u64, u64)> = ops
        .iter()
        .filter(|op| op.is_acknowledged_write())
        .filter_map(|op| Some((op.call, op.ret?)))
        .collect();
    acked.sort();
    records
        .iter()
        .filter(|r| r.kind.hits_leader() && r.evidence.is_ok())
        .filter_map(|r| {
            let start = acked.partition_point(|(call, _)| *call < r.injected);
            let first = acked[start..].iter().map(|(_, ret)| *ret).min()?;
            Some(Duration::from_nanos(first - r.injected))
        })
        .collect()
}

/// Where a run keeps its history and report: `CAPSTAN_FAULT_DIR`, else
/// the system's temporary folder; `name` plus this process's id.
pub fn output_path(name: &str) -> PathBuf {
    let dir = std::env::var_os("CAPSTAN_FAULT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let _ = std::fs::create_dir_all(&dir);
    dir.join(format!("capstan-fault-{name}-{}", std::process::id()))
}

/// What a run did and found.
pub struct Report {
    pub name: String,
    pub operations: usize,
    pub acknowledged: usize,
    pub ambiguous: usize,
    pub faults: Faults,
    pub failovers: Vec<Duration>,
    pub violations: Vec<String>,
    pub history: PathBuf,
    /// Lines specific to the profile (watch events seen, leases...).
    pub notes: Vec<String>,
}

impl Report {
    /// Writes the run's history under `CAPSTAN_FAULT_DIR` (as `file`) and
    /// starts the report that points at it.
    pub fn for_history(file: &str, name: &str, ops: &[Operation], faults: Faults) -> Report {
        let path = output_path(file).with_extension("history");
        history::write_to(&path, ops).expect("write the history");
        Report::new(name, ops, faults, path)
    }

    pub fn new(name: &str, ops: &[Operation], faults: Faults, history: PathBuf) -> Report {
        let mut report = Report {
            name: name.to_string(),
            operations: ops.len(),
            acknowledged: ops.iter().filter(|op| !op.is_ambiguous()).count(),
            ambiguous: ops.iter().filter(|op| op.is_ambiguous()).count(),
            failovers: failover_times(&faults.records, ops),
            faults,
            violations: Vec::new(),
            history,
            notes: Vec::new(),
        };
        let missing = report.faults.missing();
        if !missing.is_empty() {
            report.violations.push(format!(
                "advertised fault kinds that never took effect: {missing:?}"
            ));
        }
        report
    }

    /// Takes in what the checker found.
    pub fn absorb(&mut self, findings: Findings) {
        self.violations.extend(findings.violations);
        self.notes.extend(findings.notes);
    }

    /// Says so when the run had no partition controls.
    pub fn note_partitions(&mut self, network: Option<&Network>) {
        if network.is_none() {
            self.notes
                .push("partitions: left out (CAPSTAN_FAULT_PARTITIONS=0)".into());
        }
    }

    /// Prints the report and keeps a copy next to the history.
    pub fn publish(&self) {
        eprintln!("{self}");
        let _ = std::fs::write(self.history.with_extension("report"), format!("{self}\n"));
    }

    fn write_faults(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let faults = &self.faults;
        let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
        for record in faults.records.iter().filter(|r| r.evidence.is_ok()) {
            *by_kind.entry(format!("{:?}", record.kind)).or_default() += 1;
        }
        let counted: usize = by_kind.values().sum();
        writeln!(f, "faults that took effect: {counted} {by_kind:?}")?;
        writeln!(
            f,
            "schedule: seed {} (CAPSTAN_FAULT_SEED repeats it), order {:?}{}",
            faults.seed,
            faults.order,
            match faults.overran {
                Some(by) => format!(", ran {by:?} past its time to fit every kind in"),
                None => String::new(),
            }
        )?;
        for (i, record) in faults.records.iter().enumerate() {
            let (verdict, evidence) = match &record.evidence {
                Ok(shown) => ("shown", shown),
                Err(why) => ("NOT SHOWN, not counted", why),
            };
            let member = record.member.map_or("-".to_string(), |m| m.to_string());
            writeln!(
                f,
                "  fault {i}: {:?} on {member}: {verdict}: {evidence}",
                record.kind
            )?;
        }
        Ok(())
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "== fault report: {} ==", self.name)?;
        writeln!(
            f,
            "operations: {} ({} answered, {} ambiguous)",
            self.operations, self.acknowledged, self.ambiguous
        )?;
        self.write_faults(f)?;
        let mut sorted = self.failovers.clone();
        sorted.sort();
        match (sorted.get(sorted.len() / 2), sorted.last()) {
            (Some(median), Some(max)) => writeln!(
                f,
                "failover (fault on the leader to first acknowledged write): median {median:?}, max {max:?}, over {}",
                sorted.len()
            )?,
            _ => writeln!(f, "failover: no leader fault measured")?,
        }
        for note in &self.notes {
            writeln!(f, "{note}")?;
        }
        writeln!(f, "violations: {}", self.violations.len())?;
        for violation in &self.violations {
            writeln!(f, "  {violation}")?;
        }
        write!(f, "history: {}", self.history.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::schedule::FaultKind;

    fn record(kind: FaultKind, evidence: Result<&str, &str>) -> FaultRecord {
        FaultRecord {
            kind,
            member: Some(0),
            injected: 1,
            healed: 2,
            evidence: evidence.map(str::to_string).map_err(str::to_string),
        }
    }

    fn report_of(records: Vec<FaultRecord>) -> Report {
        let faults = Faults {
            records,
            order: vec![
                FaultKind::KillLeader,
                FaultKind::PauseFollower,
                FaultKind::KillAll,
            ],
            seed: 7,
            overran: None,
        };
        Report::new("test", &[], faults, PathBuf::from("unused.history"))
    }

    #[test]
    fn a_run_in_which_every_advertised_kind_took_effect_has_no_violation() {
        let report = report_of(vec![
            record(FaultKind::KillLeader, Ok("m1 led")),
            record(FaultKind::PauseFollower, Ok("m2 stopped")),
            record(FaultKind::KillAll, Ok("ports refused")),
        ]);
        assert!(report.violations.is_empty(), "{:?}", report.violations);
    }

    #[test]
    fn an_advertised_kind_that_never_ran_or_never_took_effect_fails_the_run() {
        let report = report_of(vec![
            record(FaultKind::KillLeader, Ok("m1 led")),
            record(FaultKind::PauseFollower, Err("m2 still answered")),
        ]);
        assert_eq!(
            report.violations,
            vec!["advertised fault kinds that never took effect: [PauseFollower, KillAll]"]
        );
    }
}
