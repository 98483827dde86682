//! Verification level 3 (Re-Animator's): the final state of the replayed tree against the
//! original's, name by name, for every name the trace changed. Both trees are read through
//! `openat2(RESOLVE_IN_ROOT)` under their roots, so neither reaches outside its root through a
//! link, and nothing is written.
//!
//! A name the trace removed (unlinked, rmdir'ed, renamed away): the same kind (missing, or
//! made again). A name it made or changed (created, opened for writing, truncated, renamed or
//! linked to, chmod'ed, chown'ed): the same kind, a symlink the same target, the same
//! permission bits and owner and, for a file, the same size and (when the trace kept the data
//! it wrote) the same contents. Names the trace only read are init's, not the replay's: init
//! makes them from what the trace showed of them (sizes, not bytes; no links it did not see).
//! Timestamps are not compared: a replay makes its own.

use super::plan::Plan;
use iolearn_trace::sys::{Call, SysTrace};
use std::collections::BTreeSet;
use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// What a name is, as level 3 compares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Not there.
    Missing,
    /// A directory: permission bits, owner, group.
    Dir(u32, u32, u32),
    /// A regular file: permission bits, owner, group, size, and a hash of its bytes (xxh3-64;
    /// `None` when not asked for).
    File(u32, u32, u32, u64, Option<u64>),
    /// A symbolic link: its target.
    Link(Vec<u8>),
    /// Anything else (device, FIFO, socket): its type bits.
    Other(u32),
}

/// A comparison's result.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    /// Names compared.
    pub compared: usize,
    /// Those that differ: (name, original's state, replay's state).
    pub differ: Vec<(Vec<u8>, State, State)>,
}

/// The kernel's own trees: not the program's state.
fn system(p: &[u8]) -> bool {
    [&b"/dev"[..], b"/proc", b"/sys"].iter().any(|d| {
        p.strip_prefix(*d)
            .is_some_and(|rest| rest.is_empty() || rest[0] == b'/')
    })
}

/// The names the trace changed or removed, and of those, the ones it made or changed.
fn names(trace: &SysTrace, plan: &Plan) -> (BTreeSet<Vec<u8>>, BTreeSet<Vec<u8>>) {
    let mut all = BTreeSet::new();
    let mut changed: BTreeSet<Vec<u8>> = plan.created.iter().cloned().collect();
    for (i, r) in trace.records.iter().enumerate() {
        let Some(call) = r.call else { continue };
        let p = plan.abs_path[i].clone();
        // A symlink's `path2` is its target's text, not a name.
        let p2 = plan.abs_path2[i]
            .clone()
            .filter(|_| !matches!(call, Call::Symlink | Call::Symlinkat));
        let writes = |f: u64| f & (libc::O_WRONLY | libc::O_RDWR | libc::O_TRUNC | libc::O_CREAT) as u64 != 0;
        let removes = matches!(
            call,
            Call::Unlink | Call::Unlinkat | Call::Rmdir | Call::Rename | Call::Renameat | Call::Renameat2
        );
        let changes = match call {
            Call::Open | Call::Openat | Call::Openat2 => r.flags.is_some_and(writes),
            Call::Creat
            | Call::Truncate
            | Call::Chmod
            | Call::Fchmodat
            | Call::Chown
            | Call::Lchown
            | Call::Fchownat
            | Call::Mkdir
            | Call::Mkdirat
            | Call::Symlink
            | Call::Symlinkat
            | Call::Setxattr
            | Call::Lsetxattr => true,
            _ => false,
        };
        if r.ok() {
            if let Some(p) = p {
                if changes {
                    changed.insert(p);
                } else if removes {
                    all.insert(p);
                }
            }
            // A rename's or link's new name now holds what the old one did.
            if let Some(p2) = p2 {
                changed.insert(p2);
            }
        }
    }
    changed.retain(|p| !system(p));
    all.retain(|p| !system(p));
    all.extend(changed.iter().cloned());
    (all, changed)
}

fn rel(abs: &[u8]) -> Option<CString> {
    let p = abs.strip_prefix(b"/").unwrap_or(abs);
    CString::new(if p.is_empty() { &b"."[..] } else { p }).ok()
}

fn open_in(root: &OwnedFd, abs: &[u8], flags: i32) -> Result<OwnedFd, i32> {
    let name = rel(abs).ok_or(libc::EINVAL)?;
    // SAFETY: open_how is plain data; zeroed is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: valid pointers for the call; the result is checked.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            name.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
    }
    // SAFETY: a descriptor just opened and owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The state of `abs` under `root`.
fn state(root: &OwnedFd, abs: &[u8], contents: bool) -> Result<State, String> {
    let shown = || String::from_utf8_lossy(abs).into_owned();
    let f = match open_in(root, abs, libc::O_PATH) {
        Ok(f) => f,
        Err(libc::ENOENT | libc::ENOTDIR | libc::ELOOP) => return Ok(State::Missing),
        Err(e) => return Err(format!("{}: {}", shown(), std::io::Error::from_raw_os_error(e))),
    };
    // SAFETY: st is a valid out-parameter; fstat works on O_PATH descriptors.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(f.as_raw_fd(), &mut st) } != 0 {
        return Err(format!("{}: {}", shown(), std::io::Error::last_os_error()));
    }
    let perm = st.st_mode & 0o7777;
    Ok(match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => State::Dir(perm, st.st_uid, st.st_gid),
        libc::S_IFLNK => {
            let mut buf = vec![0u8; 4096];
            // SAFETY: readlinkat on an O_PATH descriptor of the link with an empty name reads
            // that link; buf is valid for its length.
            let n = unsafe { libc::readlinkat(f.as_raw_fd(), c"".as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                return Err(format!("{}: {}", shown(), std::io::Error::last_os_error()));
            }
            buf.truncate(n as usize);
            State::Link(buf)
        }
        libc::S_IFREG => {
            let hash = if contents {
                let g = open_in(root, abs, libc::O_RDONLY)
                    .map_err(|e| format!("{}: {}", shown(), std::io::Error::from_raw_os_error(e)))?;
                let mut file = std::fs::File::from(g);
                let mut h = xxhash_rust::xxh3::Xxh3::new();
                let mut buf = vec![0u8; 1 << 20];
                loop {
                    let n = file.read(&mut buf).map_err(|e| format!("{}: {e}", shown()))?;
                    if n == 0 {
                        break;
                    }
                    h.update(&buf[..n]);
                }
                Some(h.digest())
            } else {
                None
            };
            State::File(perm, st.st_uid, st.st_gid, st.st_size as u64, hash)
        }
        t => State::Other(t),
    })
}

fn open_root(p: &Path) -> Result<OwnedFd, String> {
    let c =
        CString::new(p.as_os_str().as_encoded_bytes()).map_err(|_| format!("{}: a NUL in the name", p.display()))?;
    // SAFETY: a valid C string; the result is checked.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(format!("{}: {}", p.display(), std::io::Error::last_os_error()));
    }
    // SAFETY: just opened, owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Compare the names `trace` used under `original` (where it ran: `/` right after the capture)
/// and under `target` (where it was replayed). `contents`: compare the bytes of the files it
/// changed (meaningful when the trace kept the data it wrote, `--buffers full`).
pub fn compare(
    trace: &SysTrace,
    plan: &Plan,
    original: &Path,
    target: &Path,
    contents: bool,
) -> Result<Verdict, String> {
    let (a, b) = (open_root(original)?, open_root(target)?);
    let (all, changed) = names(trace, plan);
    let mut v = Verdict::default();
    for name in &all {
        let deep = changed.contains(name);
        let (x, y) = (state(&a, name, deep && contents)?, state(&b, name, deep && contents)?);
        let same = match (&x, &y) {
            (State::Dir(pa, ua, ga), State::Dir(pb, ub, gb)) => !deep || (pa, ua, ga) == (pb, ub, gb),
            // A file only read: init made it as large as the reads showed, from other bytes.
            (State::File(..), State::File(..)) if !deep => true,
            _ => x == y,
        };
        v.compared += 1;
        if !same {
            v.differ.push((name.clone(), x, y));
        }
    }
    Ok(v)
}
