//! The official Python client (`kubernetes` on PyPI) in one virtualenv
//! under target/, shared by every test that drives it.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{watchdog, workspace_root};

/// The virtualenv's python with `kubernetes` importable, installing it
/// with pip the first time.
pub fn python_with_kubernetes() -> PathBuf {
    let venv = workspace_root().join("target").join("py-kubernetes");
    let python = venv.join("bin").join("python");
    let importable = |python: &Path| {
        Command::new(python)
            .args(["-c", "import kubernetes"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if importable(&python) {
        return python;
    }
    watchdog::waiting_for("pip install kubernetes");
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .expect("python3 must be installed to run this test");
    assert!(
        made.status.success(),
        "python3 -m venv {} (is python3-venv installed?): {}",
        venv.display(),
        String::from_utf8_lossy(&made.stderr)
    );
    let pip = Command::new(venv.join("bin").join("pip"))
        .args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "kubernetes",
        ])
        .output()
        .expect("run pip");
    assert!(
        pip.status.success() && importable(&python),
        "could not install the Python client with pip (is PyPI reachable?): {}",
        String::from_utf8_lossy(&pip.stderr)
    );
    python
}
