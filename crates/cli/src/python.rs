//! Hand a command to the Python side (the lab: sweeps, training, reports).

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::Command;

/// The interpreter with the `iolearn` package: `$IOLEARN_PYTHON`, else the repository's
/// `.venv` (made by `make setup`) next to this executable's `target/` directory, else
/// `python3` on the PATH.
fn interpreter() -> PathBuf {
    if let Some(p) = std::env::var_os("IOLEARN_PYTHON") {
        return p.into();
    }
    if let Ok(exe) = std::env::current_exe() {
        for dir in exe.ancestors().skip(1) {
            let candidate = dir.join(".venv/bin/python");
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    "python3".into()
}

/// Run `python -m module args...`; returns its exit code.
pub fn run_module(module: &str, args: &[String]) -> Result<u8> {
    let py = interpreter();
    let probe = Command::new(&py)
        .args(["-c", "import iolearn"])
        .output()
        .with_context(|| format!("cannot run {}", py.display()))?;
    if !probe.status.success() {
        bail!(
            "{} cannot import the iolearn Python package: run `make setup` (or set IOLEARN_PYTHON)",
            py.display()
        );
    }
    let status = Command::new(&py)
        .arg("-m")
        .arg(module)
        .args(args)
        .status()
        .with_context(|| format!("cannot run {}", py.display()))?;
    Ok(status.code().unwrap_or(1).clamp(0, 255) as u8)
}
