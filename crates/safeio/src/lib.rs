//! `iolearn-safeio`: file input and output that a tool running as root can trust.
//!
//! iolearn runs as root (it writes sysfs knobs and loads eBPF), so every file it writes is a
//! chance to overwrite something that is not its own, and every file it reads is a chance to
//! be made to allocate without bound. Every writer and reader of the project goes through here:
//!
//! - [`write`] / [`write_with`]: an atomic write. The new contents go to an unnamed temporary
//!   file (`O_TMPFILE`) in the target's directory, are synced, linked under a fresh random name
//!   (`linkat`, which never overwrites) and renamed over the target. A crash, a `kill -9` or an
//!   error leaves the old file or none, never half a file and never a temporary file beside it
//!   (on file systems without `O_TMPFILE` the temporary is created with `O_EXCL` under a random
//!   name instead). The target itself is checked first ([`check_target`]): a symbolic link is
//!   refused (a planted link would redirect the write), so is a directory, a block device or a
//!   socket; a character device or a FIFO (`-o /dev/null`, a pipe) is written in place rather
//!   than replaced by a regular file.
//! - [`read`] / [`read_to_string`]: read at most a given number of bytes; a larger input is an
//!   error naming the file and the limit (`/dev/zero` ends there, not in the out-of-memory killer).
//! - [`excerpt`]: a bounded quotation of untrusted text for error messages.
//!
//! Errors name the file the user gave, never a temporary name.
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! let out = dir.path().join("report.json");
//! iolearn_safeio::write(&out, b"{}\n").unwrap();
//! assert_eq!(iolearn_safeio::read_to_string(&out, 1024).unwrap(), "{}\n");
//! // A planted link at the output path is refused, and nothing is written through it.
//! std::os::unix::fs::symlink("/etc/passwd", dir.path().join("link")).unwrap();
//! let err = iolearn_safeio::write(&dir.path().join("link"), b"x").unwrap_err();
//! assert!(err.to_string().contains("symbolic link"), "{err}");
//! ```
#![deny(missing_docs)]

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What went wrong, for callers that react differently (e.g. a retry on I/O errors only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The target is of a kind iolearn will not write (a link, a directory, a block device, a
    /// socket) or its directory is missing.
    Refused,
    /// The input is larger than the reader's limit.
    TooLarge,
    /// The operating system refused (permissions, no space, ...).
    Io(io::ErrorKind),
}

/// An error that names the file the user gave.
#[derive(Debug)]
pub struct Error {
    /// The file the user named (never a temporary name).
    pub path: PathBuf,
    /// What went wrong, in words.
    pub reason: String,
    /// The class of the error.
    pub kind: ErrorKind,
}

impl Error {
    fn refused(path: &Path, reason: impl Into<String>) -> Self {
        Error {
            path: path.into(),
            reason: reason.into(),
            kind: ErrorKind::Refused,
        }
    }
    fn io(path: &Path, what: &str, e: io::Error) -> Self {
        Error {
            path: path.into(),
            reason: format!("{what}: {e}"),
            kind: ErrorKind::Io(e.kind()),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

impl std::error::Error for Error {}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        let kind = match e.kind {
            ErrorKind::Io(k) => k,
            ErrorKind::Refused => io::ErrorKind::InvalidInput,
            ErrorKind::TooLarge => io::ErrorKind::FileTooLarge,
        };
        io::Error::new(kind, e.to_string())
    }
}

/// The result of this crate's functions.
pub type Result<T> = std::result::Result<T, Error>;

/// How a write to a path will happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Nothing is there: a new file is created atomically.
    Create,
    /// A regular file is there: it is replaced atomically (its mode and owner kept).
    Replace,
    /// A character device or a FIFO is there: it is written in place, never replaced.
    InPlace,
}

/// Check where a write to `path` would go, without writing. Commands call this before minutes
/// of work so that a bad output path fails at once; [`write`] checks again when it writes.
pub fn check_target(path: &Path) -> Result<Target> {
    if path.as_os_str().is_empty() || path.file_name().is_none() || path.as_os_str().as_encoded_bytes().ends_with(b"/")
    {
        return Err(Error::refused(path, "not a file name"));
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) => {
            let t = m.file_type();
            if t.is_symlink() {
                Err(Error::refused(
                    path,
                    "is a symbolic link; iolearn does not write through links (name the file itself)",
                ))
            } else if t.is_dir() {
                Err(Error::refused(path, "is a directory"))
            } else if t.is_file() {
                check_dir(path).map(|()| Target::Replace)
            } else if t.is_char_device() || t.is_fifo() {
                Ok(Target::InPlace)
            } else if t.is_block_device() {
                Err(Error::refused(
                    path,
                    "is a block device; iolearn does not write outputs to block devices",
                ))
            } else {
                Err(Error::refused(
                    path,
                    "is not a regular file, a character device or a FIFO",
                ))
            }
        }
        Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) => {
            check_dir(path).map(|()| Target::Create)
        }
        Err(e) => Err(Error::io(path, "cannot inspect", e)),
    }
}

/// The target's directory must exist and be a directory (it is never created here: a typo in
/// a directory name should not silently make a new tree as root).
fn check_dir(path: &Path) -> Result<()> {
    let dir = parent(path);
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(Error::refused(path, format!("{} is not a directory", dir.display()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(Error::refused(
            path,
            format!("directory {} does not exist", dir.display()),
        )),
        Err(e) => Err(Error::io(path, &format!("cannot reach directory {}", dir.display()), e)),
    }
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Write `bytes` to `path` atomically (see the crate documentation).
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    write_with(path, |w| w.write_all(bytes))
}

/// Write what `fill` writes to `path` atomically. An error from `fill` discards everything it
/// wrote and leaves the old file in place.
pub fn write_with(path: &Path, fill: impl FnOnce(&mut (dyn Write + Send)) -> io::Result<()>) -> Result<()> {
    match check_target(path)? {
        Target::InPlace => write_in_place(path, fill),
        Target::Create | Target::Replace => {
            let mut f = atomic_write_file::AtomicWriteFile::options()
                .open(path)
                .map_err(|e| Error::io(path, "cannot create", e))?;
            let mut w = io::BufWriter::new(&mut f);
            fill(&mut w)
                .and_then(|()| w.flush())
                .map_err(|e| Error::io(path, "cannot write", e))?;
            drop(w);
            // `commit` syncs the data, links it under a fresh name and renames it over the
            // target; dropping `f` on an error above discards the temporary file.
            f.commit().map_err(|e| Error::io(path, "cannot write", e))
        }
    }
}

/// A file written over time and published whole ([`Staged::commit`]), like [`write_with`]
/// for a writer that outlives one call: a capture's data streamed as it arrives. Dropped
/// without a commit, nothing is left. Regular files only (the target is created or replaced).
pub struct Staged {
    path: PathBuf,
    w: io::BufWriter<atomic_write_file::AtomicWriteFile>,
}

impl Staged {
    /// Start writing `path` (checked as [`check_target`] does; a device or FIFO is refused).
    pub fn create(path: &Path) -> Result<Staged> {
        if check_target(path)? == Target::InPlace {
            return Err(Error::refused(path, "is a device or a FIFO; name a regular file"));
        }
        let f = atomic_write_file::AtomicWriteFile::options()
            .open(path)
            .map_err(|e| Error::io(path, "cannot create", e))?;
        Ok(Staged {
            path: path.to_path_buf(),
            w: io::BufWriter::with_capacity(1 << 20, f),
        })
    }

    /// Append `bytes`.
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        self.w
            .write_all(bytes)
            .map_err(|e| Error::io(&self.path, "cannot write", e))
    }

    /// Sync and publish under the path (replacing what was there).
    pub fn commit(self) -> Result<()> {
        let path = self.path;
        let f = self
            .w
            .into_inner()
            .map_err(|e| Error::io(&path, "cannot write", e.into_error()))?;
        f.commit().map_err(|e| Error::io(&path, "cannot write", e))
    }
}

/// A character device or FIFO: open it without following links and without creating
/// anything, and check after opening that it is still what [`check_target`] saw.
fn write_in_place(path: &Path, fill: impl FnOnce(&mut (dyn Write + Send)) -> io::Result<()>) -> Result<()> {
    // A FIFO is opened without blocking, which fails at once (ENXIO) when nobody reads it,
    // instead of hanging until someone does; writes then block as usual.
    let fifo = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_fifo());
    let nonblock = if fifo { libc::O_NONBLOCK } else { 0 };
    let f = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_CLOEXEC | nonblock)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) => Error::refused(path, "a FIFO that nobody reads; start the reader first"),
            _ => Error::io(path, "cannot open", e),
        })?;
    let t = f
        .metadata()
        .map_err(|e| Error::io(path, "cannot inspect", e))?
        .file_type();
    if !(t.is_char_device() || t.is_fifo()) {
        return Err(Error::refused(path, "changed while being opened; not writing"));
    }
    if nonblock != 0 {
        use std::os::fd::AsRawFd;
        // SAFETY: F_GETFL/F_SETFL on a descriptor this function owns.
        let ok = unsafe {
            let flags = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
            flags >= 0 && libc::fcntl(f.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) == 0
        };
        if !ok {
            return Err(Error::io(path, "cannot set blocking mode", io::Error::last_os_error()));
        }
    }
    let mut w = io::BufWriter::new(f);
    fill(&mut w)
        .and_then(|()| w.flush())
        .map_err(|e| Error::io(path, "cannot write", e))
}

/// Read at most `limit` bytes of `path`; a larger input is an error naming the limit.
pub fn read(path: &Path, limit: u64) -> Result<Vec<u8>> {
    let f = File::open(path).map_err(|e| Error::io(path, "cannot read", e))?;
    let m = f.metadata().map_err(|e| Error::io(path, "cannot read", e))?;
    if m.is_dir() {
        return Err(Error::refused(path, "is a directory"));
    }
    if m.is_file() && m.len() > limit {
        return Err(too_large(path, limit));
    }
    read_limited(f, limit).map_err(|e| match e {
        Some(e) => Error::io(path, "cannot read", e),
        None => too_large(path, limit),
    })
}

/// Whether `a` and `b` name the same existing file (same device and inode, links followed):
/// commands refuse to write an output over one of their inputs.
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => (x.dev(), x.ino()) == (y.dev(), y.ino()),
        _ => false,
    }
}

/// Read at most `limit` bytes of `path` as UTF-8 text.
pub fn read_to_string(path: &Path, limit: u64) -> Result<String> {
    let bytes = read(path, limit)?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        Error {
            path: path.into(),
            reason: format!("not UTF-8 text (byte {at})"),
            kind: ErrorKind::Io(io::ErrorKind::InvalidData),
        }
    })
}

/// How standard input is named in errors.
pub const STDIN_NAME: &str = "<stdin>";

/// Read at most `limit` bytes of standard input (a command's `-`); errors name it
/// [`STDIN_NAME`].
pub fn read_stdin(limit: u64) -> Result<Vec<u8>> {
    let path = Path::new(STDIN_NAME);
    read_limited(io::stdin().lock(), limit).map_err(|e| match e {
        Some(e) => Error::io(path, "cannot read", e),
        None => too_large(path, limit),
    })
}

/// Read at most `limit` bytes from any reader (standard input, a pipe). `Err(None)` means the
/// input was larger than the limit.
pub fn read_limited(r: impl Read, limit: u64) -> std::result::Result<Vec<u8>, Option<io::Error>> {
    let mut buf = Vec::new();
    r.take(limit.saturating_add(1)).read_to_end(&mut buf).map_err(Some)?;
    if buf.len() as u64 > limit {
        return Err(None);
    }
    Ok(buf)
}

fn too_large(path: &Path, limit: u64) -> Error {
    Error {
        path: path.into(),
        reason: format!("larger than the {} limit for this input", human(limit)),
        kind: ErrorKind::TooLarge,
    }
}

/// A byte count in the largest whole binary unit (`64 MiB`).
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes;
    let mut u = 0;
    while u + 1 < UNITS.len() && v >= 1024 && v.is_multiple_of(1024) {
        v /= 1024;
        u += 1;
    }
    format!("{v} {}", UNITS[u])
}

/// Text bound for a terminal with its control characters escaped (a newline, or an escape
/// sequence that could rewrite the screen, from a file name or a file); the rest as it is.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// Quote untrusted text for an error message: at most `max` characters, control characters
/// escaped, and how much was left out.
pub fn excerpt(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    for c in chars.by_ref().take(max) {
        out.extend(c.escape_debug());
    }
    let rest = chars.as_str().len();
    if rest > 0 {
        format!("\"{out}\"... ({rest} more bytes)")
    } else {
        format!("\"{out}\"")
    }
}

pub mod lock;
