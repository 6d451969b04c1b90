//! The audit log file, rotated by size as kube-apiserver's (lumberjack):
//! past `--audit-log-maxsize` megabytes the file is renamed to
//! `<name>-<UTC time to the millisecond>.<ext>` (`audit-2024-05-01T10-00-00.000.log`)
//! and a new one started; backups beyond `--audit-log-maxbackup` or older
//! than `--audit-log-maxage` days are removed. Lines are never split
//! between files. The log may hold Secrets (at Request level and above):
//! it is readable by its owner only, as kube-apiserver writes it (an
//! existing log with a looser mode is tightened), and so are its backups,
//! which are the log renamed.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::pki::files::{tighten, PRIVATE_FILE};

/// When to rotate and what to keep; zero means "no limit" as in kube.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Limits {
    pub max_bytes: u64,
    pub max_backups: usize,
    pub max_age: Option<Duration>,
}

pub struct RotatingFile {
    path: PathBuf,
    limits: Limits,
    file: BufWriter<File>,
    size: u64,
}

impl RotatingFile {
    /// Opens `path` for appending (a restart goes on with the same file).
    pub fn open(path: &Path, limits: Limits) -> io::Result<RotatingFile> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = open_private(path)?;
        tighten(path, PRIVATE_FILE)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile {
            path: path.to_path_buf(),
            limits,
            file: BufWriter::new(file),
            size,
        })
    }

    /// Writes one whole line, rotating first if it would not fit.
    pub fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        let limit = self.limits.max_bytes;
        if limit > 0 && self.size > 0 && self.size + line.len() as u64 > limit {
            self.rotate()?;
        }
        self.file.write_all(line)?;
        self.size += line.len() as u64;
        Ok(())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.file.flush()?;
        let backup = self.backup_name(SystemTime::now());
        std::fs::rename(&self.path, &backup)?;
        let file = open_private(&self.path)?;
        self.file = BufWriter::new(file);
        self.size = 0;
        self.remove_old_backups()
    }

    /// `dir/stem-<time>.ext`, the time in UTC with `-` for `:`.
    fn backup_name(&self, at: SystemTime) -> PathBuf {
        let (stem, ext) = self.stem_and_ext();
        let time = humantime::format_rfc3339_millis(at)
            .to_string()
            .trim_end_matches('Z')
            .replace(':', "-");
        self.path.with_file_name(format!("{stem}-{time}{ext}"))
    }

    fn stem_and_ext(&self) -> (String, String) {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match name.rfind('.') {
            Some(dot) if dot > 0 => (name[..dot].to_string(), name[dot..].to_string()),
            _ => (name, String::new()),
        }
    }

    /// The backups of this file, newest first, with their times.
    fn backups(&self) -> io::Result<Vec<(PathBuf, SystemTime)>> {
        let (stem, ext) = self.stem_and_ext();
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut found = Vec::new();
        for entry in std::fs::read_dir(&dir)? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            let time = name
                .strip_prefix(&format!("{stem}-"))
                .and_then(|rest| rest.strip_suffix(ext.as_str()))
                .and_then(parse_backup_time);
            if let Some(time) = time {
                found.push((dir.join(&name), time));
            }
        }
        found.sort_by_key(|b| std::cmp::Reverse(b.1));
        Ok(found)
    }

    fn remove_old_backups(&self) -> io::Result<()> {
        let now = SystemTime::now();
        for (i, (path, time)) in self.backups()?.into_iter().enumerate() {
            let too_many = self.limits.max_backups > 0 && i >= self.limits.max_backups;
            let too_old = self
                .limits
                .max_age
                .is_some_and(|age| now.duration_since(time).unwrap_or_default() > age);
            if too_many || too_old {
                std::fs::remove_file(path)?;
            }
        }
        Ok(())
    }
}

/// Opens `path` to append to, made readable by its owner only if new.
fn open_private(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(PRIVATE_FILE)
        .open(path)
}

/// `2024-05-01T10-00-00.000` back to a time.
fn parse_backup_time(text: &str) -> Option<SystemTime> {
    let (date, clock) = text.split_once('T')?;
    let clock = clock.replacen('-', ":", 2);
    humantime::parse_rfc3339(&format!("{date}T{clock}Z")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(path: &Path) -> Vec<String> {
        let text = std::fs::read_to_string(path).unwrap();
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn rotates_whole_lines_and_keeps_so_many_backups() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let limits = Limits {
            max_bytes: 25,
            max_backups: 2,
            max_age: None,
        };
        let mut file = RotatingFile::open(&path, limits).unwrap();
        for i in 0..4 {
            file.write_line(format!("line number {i}\n").as_bytes())
                .unwrap();
            // Backups are named to the millisecond.
            std::thread::sleep(Duration::from_millis(3));
        }
        file.flush().unwrap();
        assert_eq!(lines(&path), vec!["line number 3"]);
        let backups = file.backups().unwrap();
        assert_eq!(backups.len(), 2, "{backups:?}");
        // Newest first: the backup before the current file holds line 2.
        assert_eq!(lines(&backups[0].0), vec!["line number 2"]);
        let name = backups[0]
            .0
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(
            name.starts_with("audit-20") && name.ends_with(".log"),
            "{name}"
        );
        assert!(parse_backup_time("2024-05-01T10-00-00.000").is_some());
    }

    #[test]
    fn a_restart_appends_and_zero_never_rotates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit");
        for _ in 0..2 {
            let mut file = RotatingFile::open(&path, Limits::default()).unwrap();
            file.write_line(b"a long line that would not fit a small limit\n")
                .unwrap();
            file.flush().unwrap();
        }
        assert_eq!(lines(&path).len(), 2);
        let file = RotatingFile::open(&path, Limits::default()).unwrap();
        assert!(file.backups().unwrap().is_empty());
    }

    #[test]
    fn the_log_and_its_backups_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        std::fs::write(&path, "older\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let limits = Limits {
            max_bytes: 10,
            ..Limits::default()
        };
        let mut file = RotatingFile::open(&path, limits).unwrap();
        assert_eq!(mode(&path), 0o600, "an existing log is tightened");
        file.write_line(b"a line past the limit\n").unwrap();
        file.flush().unwrap();
        let backups = file.backups().unwrap();
        assert_eq!(backups.len(), 1);
        assert_eq!((mode(&path), mode(&backups[0].0)), (0o600, 0o600));
    }
}
