//! The Pod Security Standards' levels and versions, and a namespace's
//! policy read from its `pod-security.kubernetes.io/<mode>[-version]`
//! labels, as kube's `api.PolicyToEvaluate` reads them.

use std::collections::BTreeMap;
use std::fmt;

/// The label prefix every PodSecurity label and audit annotation has.
pub const PREFIX: &str = "pod-security.kubernetes.io/";

/// How strict a policy is; privileged allows everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }

    fn parse(text: &str) -> Result<Level, String> {
        match text {
            "privileged" => Ok(Level::Privileged),
            "baseline" => Ok(Level::Baseline),
            "restricted" => Ok(Level::Restricted),
            _ => Err("must be one of privileged, baseline, restricted".into()),
        }
    }
}

/// The standards' version a namespace pins: `latest` or `v1.<minor>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    Latest,
    Minor(u32),
}

impl Version {
    fn parse(text: &str) -> Result<Version, String> {
        if text == "latest" {
            return Ok(Version::Latest);
        }
        let minor = text.strip_prefix("v1.").filter(|m| {
            !m.is_empty()
                && m.bytes().all(|b| b.is_ascii_digit())
                && (m.len() == 1 || !m.starts_with('0'))
        });
        minor
            .and_then(|m| m.parse().ok())
            .map(Version::Minor)
            .ok_or_else(|| "must be \"latest\" or \"v1.x\"".into())
    }

    /// Whether a check that exists since `v1.<since>` applies.
    pub fn includes(self, since: u32) -> bool {
        match self {
            Version::Latest => true,
            Version::Minor(minor) => minor >= since,
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Latest => f.write_str("latest"),
            Version::Minor(minor) => write!(f, "v1.{minor}"),
        }
    }
}

/// A level at a version, written as kube writes it: `restricted:latest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    pub level: Level,
    pub version: Version,
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level.as_str(), self.version)
    }
}

/// What the plugin does with a namespace's pods: refuse, record, warn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Enforce,
    Audit,
    Warn,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::Enforce, Mode::Audit, Mode::Warn];

    fn name(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Audit => "audit",
            Mode::Warn => "warn",
        }
    }
}

/// A label that does not parse: which, its value and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLabel {
    pub label: String,
    pub value: String,
    pub why: String,
}

/// The three modes' levels (kube's default: privileged:latest for all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub enforce: LevelVersion,
    pub audit: LevelVersion,
    pub warn: LevelVersion,
}

impl Default for Policy {
    fn default() -> Policy {
        let open = LevelVersion {
            level: Level::Privileged,
            version: Version::Latest,
        };
        Policy {
            enforce: open,
            audit: open,
            warn: open,
        }
    }
}

impl Policy {
    /// The policy a namespace's labels ask for, and the labels that do
    /// not parse. A bad enforce level enforces restricted (fail closed);
    /// a bad audit or warn level is privileged (fail open); a bad version
    /// is latest: kube's choices.
    pub fn from_labels(labels: &BTreeMap<String, String>) -> (Policy, Vec<BadLabel>) {
        Policy::default().overridden_by(labels)
    }

    /// This policy with what `labels` set in its place (the configured
    /// defaults are the base for a namespace's labels).
    pub fn overridden_by(self, labels: &BTreeMap<String, String>) -> (Policy, Vec<BadLabel>) {
        let mut policy = self;
        let mut bad = Vec::new();
        for mode in Mode::ALL {
            let key = format!("{PREFIX}{}", mode.name());
            let slot = policy.slot(mode);
            if let Some(value) = labels.get(&key) {
                slot.level = Level::parse(value).unwrap_or_else(|why| {
                    bad.push(BadLabel {
                        label: key.clone(),
                        value: value.clone(),
                        why,
                    });
                    match mode {
                        Mode::Enforce => Level::Restricted,
                        _ => Level::Privileged,
                    }
                });
            }
            let key = format!("{key}-version");
            if let Some(value) = labels.get(&key) {
                slot.version = Version::parse(value).unwrap_or_else(|why| {
                    bad.push(BadLabel {
                        label: key.clone(),
                        value: value.clone(),
                        why,
                    });
                    Version::Latest
                });
            }
        }
        (policy, bad)
    }

    fn slot(&mut self, mode: Mode) -> &mut LevelVersion {
        match mode {
            Mode::Enforce => &mut self.enforce,
            Mode::Audit => &mut self.audit,
            Mode::Warn => &mut self.warn,
        }
    }

    /// Nothing to check: every mode is privileged.
    pub fn is_open(&self) -> bool {
        [self.enforce, self.audit, self.warn]
            .iter()
            .all(|lv| lv.level == Level::Privileged)
    }
}

/// A JSON object's `metadata.labels` as a map.
pub fn labels_of(object: &serde_json::Value) -> BTreeMap<String, String> {
    object["metadata"]["labels"]
        .as_object()
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (format!("{PREFIX}{k}"), v.to_string()))
            .collect()
    }

    #[test]
    fn labels_give_each_mode_its_level_and_version() {
        let (policy, bad) = Policy::from_labels(&labels(&[
            ("enforce", "restricted"),
            ("warn", "baseline"),
            ("warn-version", "v1.25"),
        ]));
        assert!(bad.is_empty());
        assert_eq!(policy.enforce.to_string(), "restricted:latest");
        assert_eq!(policy.warn.to_string(), "baseline:v1.25");
        assert_eq!(policy.audit.to_string(), "privileged:latest");
        assert!(Policy::default().is_open());
        assert!(!policy.is_open());
    }

    #[test]
    fn bad_labels_fail_closed_for_enforce_and_open_for_the_others() {
        let (policy, bad) = Policy::from_labels(&labels(&[
            ("enforce", "strict"),
            ("warn", "strict"),
            ("audit-version", "1.25"),
        ]));
        assert_eq!(policy.enforce.level, Level::Restricted);
        assert_eq!(policy.warn.level, Level::Privileged);
        assert_eq!(policy.audit.version, Version::Latest);
        assert_eq!(bad.len(), 3);
        assert_eq!(
            bad[0].why,
            "must be one of privileged, baseline, restricted"
        );
        assert_eq!(bad[1].label, "pod-security.kubernetes.io/audit-version");
        assert_eq!(bad[1].why, "must be \"latest\" or \"v1.x\"");
    }

    #[test]
    fn versions_are_latest_or_v1_minor() {
        assert_eq!(Version::parse("v1.0"), Ok(Version::Minor(0)));
        assert_eq!(Version::parse("v1.30"), Ok(Version::Minor(30)));
        for bad in ["v1.", "v1.05", "v2.1", "latest2", "v1.x"] {
            assert!(Version::parse(bad).is_err(), "{bad}");
        }
        assert!(Version::Minor(22).includes(22));
        assert!(!Version::Minor(21).includes(22));
        assert!(Version::Latest.includes(99));
    }
}
