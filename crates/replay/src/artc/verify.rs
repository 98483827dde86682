//! Verification level 3 (Re-Animator's): the final state of the replayed tree against the
//! original's, name by name, for every name the trace changed. Both trees are read through
//! `openat2(RESOLVE_IN_ROOT)` under their roots, so neither reaches outside its root through a
//! link, and nothing is written.
//!
//! Which names, and what of them:
//! - a name the trace removed (unlinked, rmdir'ed, renamed away), or changed in place (opened
//!   for writing, chmod'ed...): the same kind (missing, directory, file, symlink, other);
//! - a name the trace made (created, or truncated, or renamed or linked from such a name):
//!   also a symlink's target, the permission bits and, for a file, the size and (when the
//!   trace kept every byte written, `--buffers full`) the contents;
//! - a name chmod'ed: the permission bits; chown'ed: the owner and group.
//!
//! A file that was there before the trace and was only written in part is the init's stand-in
//! in the replay (made as large as the trace showed, of other bytes), so only its kind is
//! compared; so are names the trace only read. Timestamps are not compared: a replay makes
//! its own. A name that cannot be read on one side is a difference that says why.

use super::model::kernel_tree;
use super::plan::Plan;
use iolearn_trace::sys::{Call, SysTrace};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
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
    /// It could not be read: why.
    Unreadable(String),
}

/// A comparison's result.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    /// Names compared.
    pub compared: usize,
    /// Those that differ: (name, original's state, replay's state).
    pub differ: Vec<(Vec<u8>, State, State)>,
}

/// What level 3 compares of a name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Depth {
    /// The trace made it: target, permission bits, size, contents.
    made: bool,
    /// Permission bits.
    mode: bool,
    /// Owner and group.
    owner: bool,
}

/// The names the trace changed or removed, and what to compare of each.
fn names(trace: &SysTrace, plan: &Plan) -> BTreeMap<Vec<u8>, Depth> {
    let mut out: BTreeMap<Vec<u8>, Depth> = BTreeMap::new();
    let made = Depth {
        made: true,
        mode: true,
        owner: false,
    };
    for p in &plan.created {
        out.insert(p.clone(), made);
    }
    for (i, r) in trace.records.iter().enumerate() {
        let Some(call) = r.call else { continue };
        if !r.ok() {
            continue;
        }
        let (Some(p), p2) = (plan.abs_path[i].clone(), plan.abs_path2[i].clone()) else {
            continue;
        };
        let flags = r.flags.unwrap_or(0);
        let has = |f: i32| flags & f as u64 != 0;
        let entry = out.entry(p.clone()).or_default();
        match call {
            Call::Open | Call::Openat | Call::Openat2 if has(libc::O_TRUNC) => *entry = made,
            Call::Creat | Call::Truncate | Call::Mkdir | Call::Mkdirat | Call::Symlink | Call::Symlinkat => {
                *entry = made
            }
            Call::Chmod | Call::Fchmodat => entry.mode = true,
            Call::Chown | Call::Lchown | Call::Fchownat => entry.owner = true,
            Call::Rename | Call::Renameat | Call::Renameat2 | Call::Link | Call::Linkat => {
                // The new name holds what the old one did; a rename leaves the old one empty
                // (an exchange swaps: both hold what the other did).
                let was = *entry;
                let exchange = call == Call::Renameat2 && has(libc::RENAME_EXCHANGE as i32);
                if let Some(p2) = p2 {
                    let other = out.get(&p2).copied().unwrap_or_default();
                    out.insert(p2, was);
                    if exchange {
                        out.insert(p, other);
                    } else if call != Call::Link && call != Call::Linkat {
                        out.insert(p, Depth::default());
                    }
                }
            }
            // Opened for writing, removed, its attributes changed: its kind.
            _ => {}
        }
    }
    out.retain(|p, _| !kernel_tree(p));
    out
}

/// Names the trace only looked at are not level 3's: keep those it changed or removed.
fn changed_or_removed(trace: &SysTrace, plan: &Plan, depth: &mut BTreeMap<Vec<u8>, Depth>) {
    let mut touched = std::collections::BTreeSet::new();
    for (i, r) in trace.records.iter().enumerate() {
        let Some(call) = r.call else { continue };
        let writes = r
            .flags
            .is_some_and(|f| f & (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) as u64 != 0);
        let changes = match call {
            Call::Open | Call::Openat | Call::Openat2 => writes,
            Call::Access | Call::Faccessat | Call::Faccessat2 | Call::Stat | Call::Lstat | Call::Newfstatat => false,
            Call::Statx | Call::Readlink | Call::Readlinkat | Call::Execve | Call::Chdir => false,
            _ => true,
        };
        if r.ok() && changes {
            touched.extend(plan.abs_path[i].iter().cloned());
            if !matches!(call, Call::Symlink | Call::Symlinkat) {
                touched.extend(plan.abs_path2[i].iter().cloned());
            }
        }
    }
    depth.retain(|p, d| *d != Depth::default() || touched.contains(p));
    for p in touched {
        if !kernel_tree(&p) {
            depth.entry(p).or_default();
        }
    }
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
        Err(libc::ENOENT | libc::ENOTDIR) => return Ok(State::Missing),
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
                // The file just stat'ed, not whatever the name holds by now (a FIFO swapped in
                // would block an open): reopened through its descriptor, without blocking.
                let mut file = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
                    .open(format!("/proc/self/fd/{}", f.as_raw_fd()))
                    .map_err(|e| format!("{}: {e}", shown()))?;
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

/// Compare the names `trace` changed under `original` (where it ran: `/` right after the
/// capture) and under `target` (where it was replayed). `contents`: compare the bytes of the
/// files it made (meaningful when the trace kept every byte it wrote, `--buffers full`).
pub fn compare(
    trace: &SysTrace,
    plan: &Plan,
    original: &Path,
    target: &Path,
    contents: bool,
) -> Result<Verdict, String> {
    let (a, b) = (open_root(original)?, open_root(target)?);
    let mut depth = names(trace, plan);
    changed_or_removed(trace, plan, &mut depth);
    let mut v = Verdict::default();
    let read = |root: &OwnedFd, name: &[u8], deep: bool| state(root, name, deep).unwrap_or_else(State::Unreadable);
    for (name, d) in &depth {
        let (x, y) = (read(&a, name, d.made && contents), read(&b, name, d.made && contents));
        let same = match (&x, &y) {
            (State::Dir(pa, ua, ga), State::Dir(pb, ub, gb)) => {
                (!d.mode || pa == pb) && (!d.owner || (ua, ga) == (ub, gb))
            }
            (State::File(pa, ua, ga, sa, ha), State::File(pb, ub, gb, sb, hb)) => {
                (!d.mode || pa == pb) && (!d.owner || (ua, ga) == (ub, gb)) && (!d.made || (sa, ha) == (sb, hb))
            }
            (State::Link(ta), State::Link(tb)) => !d.made || ta == tb,
            (State::Unreadable(_), _) | (_, State::Unreadable(_)) => false,
            _ => x == y,
        };
        v.compared += 1;
        if !same {
            v.differ.push((name.clone(), x, y));
        }
    }
    Ok(v)
}
