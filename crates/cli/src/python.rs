//! Hand a command to the Python side (the lab: sweeps, training, reports).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The interpreter with the `iolearn` package: `$IOLEARN_PYTHON`, else the repository's
/// `.venv` (made by `make setup`) beside the `target/` directory this executable was built in
/// (`REPO/target/{release,debug}/iolearn`), when it and the code it loads are [`trusted`]
/// ([`trusted_code`]); else `python3` on the PATH.
fn interpreter() -> PathBuf {
    if let Some(p) = std::env::var_os("IOLEARN_PYTHON") {
        return p.into();
    }
    if let Some(repo) = std::env::current_exe().ok().and_then(|exe| {
        exe.parent()?
            .parent()
            .filter(|t| t.ends_with("target"))?
            .parent()
            .map(Path::to_path_buf)
    }) {
        let candidate = repo.join(".venv/bin/python");
        if candidate.exists() && trusted(&candidate) && trusted_code(&repo) {
            return candidate;
        }
    }
    "python3".into()
}

/// Whether `path` and every directory above it belong to root or to us and cannot be changed
/// by anyone else (not group- or world-writable, except sticky directories such as `/tmp`,
/// where others cannot replace what we own): iolearn runs as root, and an interpreter another
/// user could plant or swap would run with root's rights. The last component may be a link
/// (a venv's `python` is one); its target is checked the same way.
fn trusted(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let safe = |p: &Path| match std::fs::symlink_metadata(p) {
        Ok(m) => {
            let owner_ok = m.uid() == 0 || m.uid() == me;
            let sticky_dir = m.is_dir() && m.mode() & 0o1000 != 0;
            owner_ok && (m.mode() & 0o022 == 0 || sticky_dir || m.file_type().is_symlink())
        }
        Err(_) => false,
    };
    let chain_ok = |p: &Path| p.ancestors().all(safe);
    chain_ok(path) && std::fs::canonicalize(path).is_ok_and(|real| chain_ok(&real))
}

/// Whether the code that interpreter would load is as safe as the interpreter: every file and
/// directory under the venv's `site-packages` (a `.pth` file there runs at start-up) and under
/// the repository's `python/iolearn` (the package, installed editable) is owned by root or us
/// and writable by nobody else. A few thousand `lstat`s, once per command.
fn trusted_code(repo: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    fn walk(p: &Path, me: u32, budget: &mut u32) -> bool {
        let Ok(m) = std::fs::symlink_metadata(p) else {
            return false;
        };
        if *budget == 0 {
            return false; // a tree too large to check is not trusted
        }
        *budget -= 1;
        let ok = (m.uid() == 0 || m.uid() == me) && (m.mode() & 0o022 == 0 || m.file_type().is_symlink());
        if !ok {
            return false;
        }
        if !m.is_dir() {
            return true;
        }
        match std::fs::read_dir(p) {
            Ok(entries) => entries.flatten().all(|e| walk(&e.path(), me, budget)),
            Err(_) => false,
        }
    }
    let mut budget = 200_000;
    let mut roots = vec![repo.join("python/iolearn")];
    if let Ok(libs) = std::fs::read_dir(repo.join(".venv/lib")) {
        roots.extend(libs.flatten().map(|e| e.path().join("site-packages")));
    }
    roots
        .iter()
        .filter(|r| std::fs::symlink_metadata(r).is_ok())
        .all(|r| trusted(r) && walk(r, me, &mut budget))
}

/// Become `python -m module args...` (exec); returns only if that fails.
pub fn run_module(module: &str, args: &[String]) -> anyhow::Error {
    let py = interpreter();
    // PYTHONSAFEPATH: the working directory (maybe /tmp) is not put first on sys.path, where
    // a planted iolearn.py or numpy.py would be imported as root.
    let probe = match Command::new(&py)
        .env("PYTHONSAFEPATH", "1")
        .args(["-c", "import iolearn"])
        .output()
    {
        Ok(p) => p,
        Err(e) => return anyhow::Error::new(e).context(format!("cannot run {}", py.display())),
    };
    if !probe.status.success() {
        return anyhow::anyhow!(
            "{} cannot import the iolearn Python package: run `make setup` (or set IOLEARN_PYTHON)",
            py.display()
        );
    }
    // Exec, not a child: a signal to this process (systemd's stop, a user's kill) must reach
    // the Python code, which removes its test bed and restores what it changed. A parent
    // waiting on a child dies of SIGTERM and leaves the child running (a benchmark's db_bench
    // processes and loop device stayed up).
    use std::os::unix::process::CommandExt;
    let err = Command::new(&py)
        .env("PYTHONSAFEPATH", "1")
        .arg("-m")
        .arg(module)
        .args(args)
        .exec();
    anyhow::Error::new(err).context(format!("cannot run {}", py.display()))
}
