//! The file-system model ARTC needs to find which resources each call touched (ROOT §2.3.1):
//! which file (inode) a path or descriptor names at that moment, through hard links, symlinks
//! and renames; which generation of a path name or descriptor number it is; which directory
//! holds the name. Inodes never appear in a trace: the model infers them, creating what a
//! successful call shows existed before the trace began (with a snapshot, from it).

use iolearn_trace::sys::{Call, SysRecord, AT_FDCWD};
use std::collections::HashMap;

/// A resource an action touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    /// A file, directory or symlink (an inode of the model).
    File(u32),
    /// A path name's generation (an id into [`Model::path_names`]).
    Path(u32),
    /// A descriptor's generation (an id into [`Model::fd_names`]).
    Fd(u32),
}

/// How an action touched a resource: it created it, used it, or ended it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Touch {
    /// Its first action (a name bound, a descriptor opened).
    Create,
    /// Any other.
    Use,
    /// Its last (a name unbound, a descriptor closed).
    Delete,
}

#[derive(Debug, Clone)]
enum Kind {
    File,
    Dir(HashMap<Vec<u8>, u32>),
    Symlink(Vec<u8>),
}

#[derive(Debug, Clone)]
struct Inode {
    kind: Kind,
}

#[derive(Debug, Clone)]
struct FdEntry {
    inode: Option<u32>,
    /// File position, as far as the trace shows (reads and writes advance it, lseek sets it).
    pos: u64,
    /// The path it was opened by (absolute): a dirfd's base for `*at` calls.
    path: Option<Vec<u8>>,
    generation: u32,
}

#[derive(Debug, Default, Clone)]
struct Process {
    cwd: Vec<u8>,
    fds: HashMap<i32, FdEntry>,
}

/// Where a path led: the directory holding its last name, the name, what it names (if
/// anything), and the absolute path (lexical: `.` and `..` folded, symlinks not expanded).
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The directory holding the final name.
    pub parent: Option<u32>,
    /// The final name.
    pub name: Vec<u8>,
    /// What the name leads to (after the final symlink, when followed).
    pub inode: Option<u32>,
    /// The absolute path.
    pub abs: Vec<u8>,
}

/// The model, fed one record at a time in trace order.
#[derive(Debug, Clone)]
pub struct Model {
    inodes: Vec<Inode>,
    root: u32,
    processes: HashMap<u32, Process>,
    /// Current generation of each path name (absolute), and ids of (name, generation).
    path_gen: HashMap<Vec<u8>, u32>,
    path_ids: HashMap<(Vec<u8>, u32), u32>,
    /// (name, generation) of each path resource id.
    pub path_names: Vec<(Vec<u8>, u32)>,
    fd_gen: HashMap<(u32, i32), u32>,
    fd_ids: HashMap<(u32, i32, u32), u32>,
    /// (pid, fd, generation) of each descriptor resource id.
    pub fd_names: Vec<(u32, i32, u32)>,
    /// Where a process first seen in the trace is (the trace's starting directory).
    start_cwd: Vec<u8>,
    /// Entries a call showed existed before the trace (absolute path then, inode).
    made_up: Vec<(Vec<u8>, u32)>,
    /// Bytes each file held at least before the trace (what reads of it returned).
    min_size: HashMap<u32, u64>,
    /// The size a stat showed of a file from before the trace.
    stat_size: HashMap<u32, u64>,
    /// Files the trace wrote to (what it reads of them afterwards may be its own bytes).
    written: std::collections::HashSet<u32>,
    /// What reads returned of files from before the trace, before the trace wrote to them:
    /// (inode, file offset, the bytes' offset in the data side file, length).
    read_data: Vec<(u32, u64, u64, u64)>,
    /// Files created in the trace (their earlier contents are not the initial tree's).
    created: std::collections::HashSet<u32>,
    /// Names the trace created that the initial tree did not have.
    pub created_paths: Vec<Vec<u8>>,
    /// The descriptors the last fork copied: (parent's resource, child's resource), both
    /// [`Resource::Fd`] ids (the replay copies its open files along them).
    pub fork_copies: Vec<(Resource, Resource)>,
    /// The call being applied did not fail with ENOTDIR: every entry its path went through
    /// that the model knows is a directory.
    through_dirs: bool,
}

/// An entry of the tree as it was before the trace, as far as the trace shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Initial {
    /// A directory.
    Dir(Vec<u8>),
    /// A regular file at least this large.
    File(Vec<u8>, u64),
    /// A symlink and its target.
    Symlink(Vec<u8>, Vec<u8>),
}

/// A name in the kernel's own trees (/dev, /proc, /sys): not the program's state, and sized by
/// what was read of it, not by its stat.
pub fn kernel_tree(p: &[u8]) -> bool {
    [&b"/dev"[..], b"/proc", b"/sys"].iter().any(|d| {
        p.strip_prefix(*d)
            .is_some_and(|rest| rest.is_empty() || rest[0] == b'/')
    })
}

const MAX_SYMLINKS: usize = 40;
/// Names a directory rename renames at most, as the model follows them.
const MAX_BELOW: usize = 1 << 20;

/// Calls outside the table that make descriptors the model does not follow (and the replay
/// does not make): their I/O and closes are not replayed.
pub const FOREIGN: &[&str] = &[
    "socket",
    "accept",
    "accept4",
    "eventfd",
    "eventfd2",
    "epoll_create",
    "epoll_create1",
    "memfd_create",
    "timerfd_create",
    "signalfd",
    "signalfd4",
    "inotify_init",
    "inotify_init1",
    "pidfd_open",
    "fanotify_init",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "open_tree",
    "fsopen",
    "fsmount",
    "memfd_secret",
];

impl Default for Model {
    fn default() -> Self {
        Model::new()
    }
}

impl Model {
    /// Processes first seen in the trace start in `dir` (absolute; else `/`).
    pub fn start_in(&mut self, dir: &[u8]) {
        if dir.first() == Some(&b'/') {
            self.start_cwd = normalize(dir);
        }
    }

    /// An empty tree: only `/`.
    pub fn new() -> Model {
        Model {
            inodes: vec![Inode {
                kind: Kind::Dir(HashMap::new()),
            }],
            root: 0,
            processes: HashMap::new(),
            path_gen: HashMap::new(),
            path_ids: HashMap::new(),
            path_names: Vec::new(),
            fd_gen: HashMap::new(),
            fd_ids: HashMap::new(),
            fd_names: Vec::new(),
            start_cwd: b"/".to_vec(),
            made_up: Vec::new(),
            min_size: HashMap::new(),
            stat_size: HashMap::new(),
            written: std::collections::HashSet::new(),
            read_data: Vec::new(),
            created: Default::default(),
            created_paths: Vec::new(),
            through_dirs: false,
            fork_copies: Vec::new(),
        }
    }

    /// What the trace's reads returned of files from before the trace (before it wrote to
    /// them), for init to write back: (path, file offset, offset in the data side file, length).
    pub fn initial_data(&self) -> Vec<(Vec<u8>, u64, u64, u64)> {
        let names: HashMap<u32, &Vec<u8>> = self.made_up.iter().map(|(p, i)| (*i, p)).collect();
        self.read_data
            .iter()
            .filter_map(|&(ino, at, off, len)| Some(((*names.get(&ino)?).clone(), at, off, len)))
            .collect()
    }

    /// The tree before the trace, as the calls showed it (parents before children).
    pub fn initial(&self) -> Vec<Initial> {
        let mut out: Vec<Initial> = self
            .made_up
            .iter()
            .map(|(p, i)| match &self.inodes[*i as usize].kind {
                Kind::Dir(_) => Initial::Dir(p.clone()),
                Kind::Symlink(t) => Initial::Symlink(p.clone(), t.clone()),
                Kind::File => {
                    // The kernel's own files (/proc, /sys, /dev) stat as 0 or 4096 bytes
                    // whatever they hold: only their reads say how large they are.
                    let system = kernel_tree(p);
                    let read = self.min_size.get(i).copied().unwrap_or(0);
                    let stat = self.stat_size.get(i).copied().unwrap_or(0);
                    Initial::File(p.clone(), if system { read } else { read.max(stat) })
                }
            })
            .collect();
        out.sort_by(|a, b| name_of(a).cmp(name_of(b)));
        out
    }

    /// Add what a snapshot shows existed before the trace (parents made as directories).
    pub fn seed(&mut self, entry: &Initial) {
        let abs = normalize(name_of(entry));
        let res = self.resolve(&abs, false, true, false);
        if let (Some(parent), None) = (res.parent, res.inode) {
            let kind = match entry {
                Initial::Symlink(_, t) => Kind::Symlink(t.clone()),
                Initial::Dir(_) => Kind::Dir(HashMap::new()),
                Initial::File(..) => Kind::File,
            };
            let c = self.new_inode(kind);
            if let Initial::File(_, size) = entry {
                self.min_size.insert(c, *size);
            }
            self.entries(parent).map(|e| e.insert(res.name.clone(), c));
            self.made_up.push((abs, c));
        }
    }

    /// Inodes the model knows (ids 0..n).
    pub fn inodes(&self) -> usize {
        self.inodes.len()
    }

    /// The inode a path names now, from `/` (symlinks followed), if the model knows it.
    pub fn lookup(&self, abs: &[u8]) -> Option<u32> {
        let mut cur = self.root;
        for c in components(abs) {
            match &self.inodes[cur as usize].kind {
                Kind::Dir(e) => cur = *e.get(c)?,
                _ => return None,
            }
        }
        Some(cur)
    }

    fn new_inode(&mut self, kind: Kind) -> u32 {
        self.inodes.push(Inode { kind });
        (self.inodes.len() - 1) as u32
    }

    fn entries(&mut self, dir: u32) -> Option<&mut HashMap<Vec<u8>, u32>> {
        match &mut self.inodes[dir as usize].kind {
            Kind::Dir(e) => Some(e),
            _ => None,
        }
    }

    fn process(&mut self, pid: u32) -> &mut Process {
        // A process first seen here started before the trace: at `/` with no descriptors the
        // model follows. (A fork's child gets its parent's copy at the fork.)
        let cwd = &self.start_cwd;
        self.processes.entry(pid).or_insert_with(|| Process {
            cwd: cwd.clone(),
            fds: HashMap::new(),
        })
    }

    /// A path's current generation as a resource.
    fn path_resource(&mut self, abs: &[u8], bump: bool) -> Resource {
        let g = self.path_gen.entry(abs.to_vec()).or_insert(1);
        if bump {
            *g += 1;
        }
        let key = (abs.to_vec(), *g);
        let next = self.path_names.len() as u32;
        let id = *self.path_ids.entry(key.clone()).or_insert(next);
        if id == next {
            self.path_names.push(key);
        }
        Resource::Path(id)
    }

    fn fd_resource(&mut self, pid: u32, fd: i32, generation: u32) -> Resource {
        let key = (pid, fd, generation);
        let next = self.fd_names.len() as u32;
        let id = *self.fd_ids.entry(key).or_insert(next);
        if id == next {
            self.fd_names.push(key);
        }
        Resource::Fd(id)
    }

    /// The absolute form of `path` for a call of `pid` relative to `dirfd`; `None` when the
    /// directory is a descriptor the model does not follow (opened before the trace): the
    /// name cannot be placed, and a guess would act on another one.
    pub fn absolute(&mut self, pid: u32, dirfd: Option<i32>, path: &[u8]) -> Option<Vec<u8>> {
        if path.first() == Some(&b'/') {
            return Some(normalize(path));
        }
        let base = match dirfd {
            Some(fd) if fd != AT_FDCWD => self.process(pid).fds.get(&fd)?.path.clone()?,
            _ => self.process(pid).cwd.clone(),
        };
        let mut joined = base;
        joined.push(b'/');
        joined.extend_from_slice(path);
        Some(normalize(&joined))
    }

    /// Walk `abs`. `exists`: the call succeeded, so every directory on the way existed (made
    /// up when the model has not seen it) and, with `last_exists`, the final name too.
    fn resolve(&mut self, abs: &[u8], follow_last: bool, exists: bool, last_exists: bool) -> Resolved {
        let mut comps: std::collections::VecDeque<Vec<u8>> = components(abs).map(<[u8]>::to_vec).collect();
        let mut out = Resolved {
            parent: None,
            name: comps.back().cloned().unwrap_or_default(),
            inode: None,
            abs: abs.to_vec(),
        };
        // The directories walked so far from `/` (name, inode): `..` goes back one.
        let mut stack: Vec<(Vec<u8>, u32)> = Vec::new();
        let cur = |stack: &Vec<(Vec<u8>, u32)>, root: u32| stack.last().map_or(root, |x| x.1);
        let mut hops = 0;
        if comps.is_empty() {
            out.inode = Some(self.root);
            return out;
        }
        while let Some(name) = comps.pop_front() {
            let last = comps.is_empty();
            if name == b".." {
                stack.pop();
                if last {
                    out.inode = Some(cur(&stack, self.root));
                }
                continue;
            }
            let dir = cur(&stack, self.root);
            let found = self.entries(dir).and_then(|e| e.get(&name).copied());
            let child = match found {
                Some(c) => Some(c),
                None if exists && (!last || last_exists) && self.entries(dir).is_some() => {
                    let kind = if last { Kind::File } else { Kind::Dir(HashMap::new()) };
                    let c = self.new_inode(kind);
                    if let Some(e) = self.entries(dir) {
                        e.insert(name.clone(), c);
                    }
                    // Under a directory the trace made, nothing was there before it.
                    if !self.created.contains(&dir) {
                        let mut p = Vec::new();
                        for (n, _) in stack.iter().chain(std::iter::once(&(name.clone(), c))) {
                            p.push(b'/');
                            p.extend_from_slice(n);
                        }
                        self.made_up.push((p, c));
                    }
                    Some(c)
                }
                None => None,
            };
            if last {
                out.parent = Some(dir);
                out.name = name.clone();
            }
            let Some(c) = child else {
                if !last {
                    out.parent = None;
                }
                return out;
            };
            if let Kind::Symlink(target) = &self.inodes[c as usize].kind {
                if (!last || follow_last) && hops < MAX_SYMLINKS {
                    hops += 1;
                    let target = target.clone();
                    if target.first() == Some(&b'/') {
                        stack.clear();
                    }
                    for t in components(&target).collect::<Vec<_>>().into_iter().rev() {
                        comps.push_front(t.to_vec());
                    }
                    if comps.is_empty() {
                        out.inode = Some(cur(&stack, self.root));
                        return out;
                    }
                    continue;
                }
            }
            if !last && !matches!(self.inodes[c as usize].kind, Kind::Dir(_)) {
                if !exists && !self.through_dirs {
                    return out;
                }
                // A call that succeeded went through it: it was a directory.
                self.inodes[c as usize].kind = Kind::Dir(HashMap::new());
            }
            if last {
                out.inode = Some(c);
            }
            stack.push((name, c));
        }
        out
    }

    /// Every path below directory `dir`, as (relative name, inode), depth first; at most
    /// `MAX_BELOW` of them (a bad trace cannot make it walk forever).
    fn below(&self, dir: u32, prefix: &[u8], out: &mut Vec<(Vec<u8>, u32)>) {
        let mut stack = vec![(dir, prefix.to_vec())];
        let mut seen = std::collections::HashSet::new();
        while let Some((d, pre)) = stack.pop() {
            if !seen.insert(d) {
                continue;
            }
            if let Kind::Dir(e) = &self.inodes[d as usize].kind {
                let mut names: Vec<_> = e.iter().collect();
                names.sort();
                for (name, &c) in names.into_iter().rev() {
                    if out.len() >= MAX_BELOW {
                        return;
                    }
                    let mut p = pre.clone();
                    p.push(b'/');
                    p.extend_from_slice(name);
                    out.push((p.clone(), c));
                    stack.push((c, p));
                }
            }
        }
    }

    /// Apply one call and return what it touched (the thread aside).
    pub fn apply(&mut self, r: &SysRecord) -> Vec<(Resource, Touch)> {
        let Some(call) = r.call else {
            // A call outside the table that returns a descriptor (a socket, an eventfd): the
            // number no longer names what it did.
            let mut t = Vec::new();
            if r.ret >= 0 && r.exit_ns.is_some() && FOREIGN.contains(&r.call_name()) {
                self.forget_fd(r.pid, r.ret as i32, &mut t);
            }
            return t;
        };
        let pid = r.pid;
        let ok = r.ok() && r.exit_ns.is_some();
        self.fork_copies.clear();
        self.through_dirs = ok || (r.exit_ns.is_some() && r.errno().is_some_and(|e| e != libc::ENOTDIR));
        let mut t: Vec<(Resource, Touch)> = Vec::new();
        let use_fd = |m: &mut Model, t: &mut Vec<(Resource, Touch)>, fd: Option<i32>, touch: Touch| {
            let fd = fd?;
            let e = m.process(pid).fds.get(&fd).cloned()?;
            t.push((m.fd_resource(pid, fd, e.generation), touch));
            if let Some(ino) = e.inode {
                t.push((Resource::File(ino), Touch::Use));
            }
            Some(e)
        };
        match call {
            Call::Open | Call::Openat | Call::Openat2 | Call::Creat => {
                let Some(path) = r.path.as_deref() else { return t };
                let flags = if call == Call::Creat {
                    (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64
                } else {
                    r.flags.unwrap_or(0)
                };
                let creat = flags & libc::O_CREAT as u64 != 0;
                let Some(abs) = self.absolute(pid, r.dirfd, path) else {
                    return t;
                };
                let before = self.lookup(&abs);
                // A name opened with O_CREAT that the model does not know is taken as new (and
                // removed from the target before replay). Known limit: without a snapshot, a
                // file that existed and was opened with O_CREAT alone is taken as new too.
                let res = self.resolve(&abs, flags & libc::O_NOFOLLOW as u64 == 0, ok, ok && !creat);
                let created = ok && creat && before.is_none() && res.inode.is_none();
                let inode = match (res.inode, created, res.parent) {
                    (Some(i), _, _) => Some(i),
                    (None, true, Some(parent)) => {
                        let c = self.new_inode(Kind::File);
                        self.created.insert(c);
                        self.entries(parent).map(|e| e.insert(res.name.clone(), c));
                        Some(c)
                    }
                    _ => None,
                };
                if let Some(parent) = res.parent {
                    t.push((Resource::File(parent), Touch::Use));
                }
                if let Some(i) = inode {
                    t.push((Resource::File(i), Touch::Use));
                    if ok && flags & libc::O_DIRECTORY as u64 != 0 {
                        self.make_dir(i);
                    }
                    if ok && flags & libc::O_TRUNC as u64 != 0 {
                        self.created.insert(i); // what it held before does not matter
                    }
                }
                if created {
                    self.created_paths.push(abs.clone());
                }
                t.push((
                    self.path_resource(&abs, false),
                    if created { Touch::Create } else { Touch::Use },
                ));
                if let Some(fd) = r.new_fd() {
                    self.open_fd(pid, fd, inode, Some(abs), &mut t);
                }
            }
            Call::Close => {
                if let Some(fd) = r.fd {
                    if use_fd(self, &mut t, Some(fd), Touch::Delete).is_some() && r.ok() {
                        self.process(pid).fds.remove(&fd);
                    }
                }
            }
            Call::Dup | Call::Dup2 | Call::Dup3 | Call::Fcntl => {
                let e = use_fd(self, &mut t, r.fd, Touch::Use);
                if let Some(new) = r.new_fd() {
                    match e {
                        Some(e) => self.open_fd(pid, new, e.inode, e.path, &mut t),
                        // A copy of a descriptor the model does not follow (the process had
                        // it before the trace, or it is a socket) is not followed either.
                        None => self.forget_fd(pid, new, &mut t),
                    }
                }
            }
            Call::Pipe | Call::Pipe2 => {
                // Pipes are not files: their ends are not followed (nor replayed).
                if ok {
                    for fd in [r.fd, r.fd2].into_iter().flatten() {
                        self.forget_fd(pid, fd, &mut t);
                    }
                }
            }
            Call::Mkdir | Call::Mkdirat | Call::Symlink | Call::Symlinkat => {
                // A new name for a new directory or symlink.
                let Some(path) = r.path.as_deref() else { return t };
                let Some(abs) = self.absolute(pid, r.dirfd, path) else {
                    return t;
                };
                let res = self.resolve(&abs, false, ok, false);
                if let Some(parent) = res.parent {
                    t.push((Resource::File(parent), Touch::Use));
                    if ok {
                        let kind = match call {
                            Call::Mkdir | Call::Mkdirat => Kind::Dir(HashMap::new()),
                            _ => Kind::Symlink(r.path2.clone().unwrap_or_default()),
                        };
                        let made = self.new_inode(kind);
                        self.created.insert(made);
                        self.entries(parent).map(|e| e.insert(res.name.clone(), made));
                        self.created_paths.push(abs.clone());
                        t.push((Resource::File(made), Touch::Use));
                    }
                }
                t.push((
                    self.path_resource(&abs, false),
                    if ok { Touch::Create } else { Touch::Use },
                ));
            }
            Call::Link | Call::Linkat => {
                let (Some(old), Some(new)) = (r.path.as_deref(), r.path2.as_deref()) else {
                    return t;
                };
                let (Some(old_abs), Some(new_abs)) =
                    (self.absolute(pid, r.dirfd, old), self.absolute(pid, r.dirfd2, new))
                else {
                    return t;
                };
                let follow = r.flags.unwrap_or(0) & libc::AT_SYMLINK_FOLLOW as u64 != 0;
                let from = self.resolve(&old_abs, follow, ok, ok);
                t.push((self.path_resource(&old_abs, false), Touch::Use));
                let to = self.resolve(&new_abs, false, ok, false);
                if let Some(parent) = to.parent {
                    t.push((Resource::File(parent), Touch::Use));
                }
                if let Some(i) = from.inode {
                    t.push((Resource::File(i), Touch::Use));
                    // A hard link to a directory is impossible; one in a trace is a bad trace
                    // (and would make the tree a cycle).
                    if ok && !matches!(self.inodes[i as usize].kind, Kind::Dir(_)) {
                        if let Some(parent) = to.parent {
                            self.entries(parent).map(|e| e.insert(to.name.clone(), i));
                            self.created_paths.push(new_abs.clone());
                        }
                    }
                }
                t.push((
                    self.path_resource(&new_abs, false),
                    if ok { Touch::Create } else { Touch::Use },
                ));
            }
            Call::Unlink | Call::Unlinkat | Call::Rmdir => {
                let Some(path) = r.path.as_deref() else { return t };
                let Some(abs) = self.absolute(pid, r.dirfd, path) else {
                    return t;
                };
                let res = self.resolve(&abs, false, ok, ok);
                if let Some(parent) = res.parent {
                    t.push((Resource::File(parent), Touch::Use));
                }
                if let Some(i) = res.inode {
                    t.push((Resource::File(i), Touch::Use));
                }
                t.push((
                    self.path_resource(&abs, false),
                    if ok { Touch::Delete } else { Touch::Use },
                ));
                if ok {
                    if let Some(parent) = res.parent {
                        self.entries(parent).map(|e| e.remove(&res.name));
                    }
                    // What rmdir (or unlinkat's AT_REMOVEDIR) removed was a directory.
                    let dir = call == Call::Rmdir || r.flags.unwrap_or(0) & libc::AT_REMOVEDIR as u64 != 0;
                    if let (true, Some(i)) = (dir, res.inode) {
                        self.make_dir(i);
                    }
                    self.path_gen.entry(abs).and_modify(|g| *g += 1);
                }
            }
            Call::Rename | Call::Renameat | Call::Renameat2 => {
                let (Some(old), Some(new)) = (r.path.as_deref(), r.path2.as_deref()) else {
                    return t;
                };
                let (Some(old_abs), Some(new_abs)) =
                    (self.absolute(pid, r.dirfd, old), self.absolute(pid, r.dirfd2, new))
                else {
                    return t;
                };
                let from = self.resolve(&old_abs, false, ok, ok);
                let to = self.resolve(&new_abs, false, ok, false);
                for p in [from.parent, to.parent].into_iter().flatten() {
                    if !t.contains(&(Resource::File(p), Touch::Use)) {
                        t.push((Resource::File(p), Touch::Use));
                    }
                }
                let moved = from.inode;
                let mut below = Vec::new();
                if let Some(m) = moved {
                    t.push((Resource::File(m), Touch::Use));
                    self.below(m, b"", &mut below);
                    for (_, i) in &below {
                        t.push((Resource::File(*i), Touch::Use));
                    }
                }
                if let Some(replaced) = to.inode.filter(|_| ok) {
                    if Some(replaced) != moved {
                        t.push((Resource::File(replaced), Touch::Use));
                    }
                }
                if !ok {
                    t.push((self.path_resource(&old_abs, false), Touch::Use));
                    t.push((self.path_resource(&new_abs, false), Touch::Use));
                    return t;
                }
                // The old names end, the new begin: the moved entry's and everything below.
                // (A name the rename replaces ends as well: its next generation begins.)
                let exchange = r.flags.unwrap_or(0) & libc::RENAME_EXCHANGE as u64 != 0;
                let mut names = vec![(old_abs.clone(), new_abs.clone())];
                for (rel, _) in &below {
                    names.push(([old_abs.as_slice(), rel].concat(), [new_abs.as_slice(), rel].concat()));
                }
                for (o, _) in &names {
                    t.push((
                        self.path_resource(o, false),
                        if exchange { Touch::Use } else { Touch::Delete },
                    ));
                }
                for (o, _) in &names {
                    if !exchange {
                        self.path_gen.entry(o.clone()).and_modify(|g| *g += 1);
                    }
                }
                for (i, (_, n)) in names.iter().enumerate() {
                    if exchange {
                        t.push((self.path_resource(n, false), Touch::Use));
                    } else if i == 0 && to.inode.is_some() {
                        // The name the rename replaces ends; the moved entry's generation begins.
                        t.push((self.path_resource(n, false), Touch::Delete));
                        t.push((self.path_resource(n, true), Touch::Create));
                    } else {
                        t.push((self.path_resource(n, false), Touch::Create));
                    }
                }
                if let (Some(m), Some(fp), Some(tp)) = (moved, from.parent, to.parent) {
                    let other = to.inode;
                    self.entries(fp).map(|e| e.remove(&from.name));
                    self.entries(tp).map(|e| e.insert(to.name.clone(), m));
                    if exchange {
                        if let Some(o) = other {
                            self.entries(fp).map(|e| e.insert(from.name.clone(), o));
                        }
                    }
                }
            }
            Call::Chdir => {
                let Some(path) = r.path.as_deref() else { return t };
                let Some(abs) = self.absolute(pid, None, path) else {
                    return t;
                };
                let res = self.resolve(&abs, true, ok, ok);
                self.touch_path(&res, &mut t);
                if ok {
                    if let Some(i) = res.inode {
                        self.make_dir(i);
                    }
                    self.process(pid).cwd = abs;
                }
            }
            Call::Fchdir => {
                if let Some(e) = use_fd(self, &mut t, r.fd, Touch::Use) {
                    if let (true, Some(p)) = (ok, e.path) {
                        self.process(pid).cwd = p;
                    }
                }
            }
            Call::Clone | Call::Clone3 | Call::Fork | Call::Vfork => {
                let thread =
                    matches!(call, Call::Clone | Call::Clone3) && r.flags.unwrap_or(0) & libc::CLONE_THREAD as u64 != 0;
                if ok && r.ret > 0 && !thread {
                    // The child starts with a copy of this process's descriptors and directory:
                    // each descriptor a resource of its own from now on, begun by the fork.
                    let child = r.ret as u32;
                    let table = self.process(pid).clone();
                    let mut copies = Vec::new();
                    for (&fd, e) in &table.fds {
                        let from = self.fd_resource(pid, fd, e.generation);
                        // The copy reads each descriptor: ordered with its other uses.
                        t.push((from, Touch::Use));
                        let g = self.fd_gen.entry((child, fd)).or_insert(0);
                        *g += 1;
                        let generation = *g;
                        let to = self.fd_resource(child, fd, generation);
                        copies.push((from, to));
                    }
                    let mut table = table;
                    for (&fd, e) in table.fds.iter_mut() {
                        e.generation = self.fd_gen[&(child, fd)];
                    }
                    self.processes.insert(child, table);
                    self.fork_copies = copies;
                }
            }
            Call::ExitGroup => {
                // The process's descriptors close with it.
                let fds: Vec<i32> = self.process(pid).fds.keys().copied().collect();
                for fd in fds {
                    self.forget_fd(pid, fd, &mut t);
                }
            }
            Call::Exit | Call::Sync => {}
            _ => {
                let roles = call.roles();
                let has = |x| roles.contains(&x);
                if has(iolearn_trace::sys::Role::Fd) {
                    if let Some(e) = use_fd(self, &mut t, r.fd, Touch::Use) {
                        if ok && matches!(call, Call::Getdents | Call::Getdents64) {
                            if let Some(i) = e.inode {
                                self.make_dir(i);
                            }
                        }
                        if let (true, Some(i), Some(st), Some(Call::Fstat)) = (ok, e.inode, r.result.as_deref(), r.call)
                        {
                            self.learn_stat(i, st);
                        }
                        self.advance(pid, r, e);
                    }
                }
                if has(iolearn_trace::sys::Role::Fd2) {
                    use_fd(self, &mut t, r.fd2, Touch::Use);
                }
                if let (true, Some(path)) = (has(iolearn_trace::sys::Role::Path), r.path.as_deref()) {
                    // `AT_EMPTY_PATH` with no name: the call acts on the descriptor's own
                    // object (a symlink an O_PATH|O_NOFOLLOW open holds), not on a name.
                    if path.is_empty() && r.flags.unwrap_or(0) & libc::AT_EMPTY_PATH as u64 != 0 {
                        if let (true, Some(e)) = (ok, use_fd(self, &mut t, r.dirfd, Touch::Use)) {
                            if let (Some(i), Some(st)) = (e.inode, r.result.as_deref()) {
                                self.learn_stat(i, st);
                            }
                        }
                        return t;
                    }
                    let Some(abs) = self.absolute(pid, r.dirfd, path) else {
                        return t;
                    };
                    let nofollow = matches!(call, Call::Lstat | Call::Lchown | Call::Readlink | Call::Readlinkat)
                        || matches!(
                            call,
                            Call::Lsetxattr | Call::Lgetxattr | Call::Llistxattr | Call::Lremovexattr
                        )
                        || r.flags.unwrap_or(0) & libc::AT_SYMLINK_NOFOLLOW as u64 != 0;
                    let res = self.resolve(&abs, !nofollow, ok, ok);
                    // A readlink that succeeded read a symlink: what it returned is its target
                    // (when the trace kept it; else a stand-in of the same length, so that a
                    // replayed readlink returns what the original did).
                    if let (true, Some(i)) = (ok && matches!(call, Call::Readlink | Call::Readlinkat), res.inode) {
                        if matches!(self.inodes[i as usize].kind, Kind::File) {
                            let target = r
                                .result
                                .clone()
                                .unwrap_or_else(|| vec![b'_'; (r.ret as usize).min(4096)]);
                            self.inodes[i as usize].kind = Kind::Symlink(target);
                        }
                    }
                    if ok {
                        if let (Some(i), Some(st)) = (res.inode, r.result.as_deref()) {
                            self.learn_stat(i, st);
                        }
                    }
                    self.touch_path(&res, &mut t);
                }
            }
        }
        t
    }

    /// Follow a descriptor's position through reads, writes and seeks, and note how large a
    /// file that existed before the trace must have been for its reads to return what they did.
    fn advance(&mut self, pid: u32, r: &SysRecord, e: FdEntry) {
        let Some(fd) = r.fd else { return };
        let moved = u64::try_from(r.ret).unwrap_or(0);
        let (end, pos) = match r.call {
            Some(Call::Read | Call::Readv) => (Some(e.pos.saturating_add(moved)), Some(e.pos.saturating_add(moved))),
            Some(Call::Write | Call::Writev) => (None, Some(e.pos.saturating_add(moved))),
            Some(Call::Pread64 | Call::Preadv | Call::Preadv2) => (
                r.offset.map(|o| u64::try_from(o).unwrap_or(0).saturating_add(moved)),
                None,
            ),
            Some(Call::Lseek) if r.ret >= 0 => (None, Some(moved)),
            _ => (None, None),
        };
        if let (Some(end), Some(ino)) = (end.filter(|_| moved > 0), e.inode) {
            if !self.created.contains(&ino) {
                let m = self.min_size.entry(ino).or_insert(0);
                *m = (*m).max(end);
                // The bytes the read returned, where the trace kept them: init writes them back.
                if let (iolearn_trace::sys::Data::Bytes { offset, len }, false) = (r.data, self.written.contains(&ino))
                {
                    if len == moved {
                        self.read_data.push((ino, end - moved, offset, len));
                    }
                }
            }
        }
        if let (Some(c), Some(ino)) = (r.call, e.inode) {
            if c.writes() || matches!(c, Call::Ftruncate | Call::Fallocate) {
                self.written.insert(ino);
            }
        }
        if let Some(p) = pos {
            if let Some(x) = self.process(pid).fds.get_mut(&fd) {
                x.pos = p;
            }
        }
    }

    /// What a stat showed of a file that existed before the trace: its type and size.
    fn learn_stat(&mut self, i: u32, st: &[u8]) {
        let Some((mode, size)) = iolearn_trace::sys::parse_stat_result(st) else {
            return;
        };
        match mode & libc::S_IFMT {
            libc::S_IFDIR => self.make_dir(i),
            libc::S_IFREG => {
                if let (Some(sz), false) = (size, self.created.contains(&i)) {
                    let m = self.stat_size.entry(i).or_insert(0);
                    *m = (*m).max(sz);
                }
            }
            _ => {}
        }
    }

    /// What a call showed is a directory (a file made up for it had no entries yet).
    fn make_dir(&mut self, i: u32) {
        if matches!(self.inodes[i as usize].kind, Kind::File) {
            self.inodes[i as usize].kind = Kind::Dir(HashMap::new());
        }
    }

    fn touch_path(&mut self, res: &Resolved, t: &mut Vec<(Resource, Touch)>) {
        if let Some(parent) = res.parent {
            t.push((Resource::File(parent), Touch::Use));
        }
        if let Some(i) = res.inode {
            if Some(i) != res.parent {
                t.push((Resource::File(i), Touch::Use));
            }
        }
        t.push((self.path_resource(&res.abs, false), Touch::Use));
    }

    /// The resource a descriptor number of `pid` names now, if the model follows it.
    pub fn current_fd(&mut self, pid: u32, fd: i32) -> Option<Resource> {
        let g = self.processes.get(&pid)?.fds.get(&fd)?.generation;
        Some(self.fd_resource(pid, fd, g))
    }

    /// A descriptor number now names something the model does not follow: its last
    /// generation (if any) ends.
    pub fn forget_fd(&mut self, pid: u32, fd: i32, t: &mut Vec<(Resource, Touch)>) {
        if let Some(e) = self.process(pid).fds.remove(&fd) {
            t.push((self.fd_resource(pid, fd, e.generation), Touch::Delete));
        }
    }

    fn open_fd(
        &mut self,
        pid: u32,
        fd: i32,
        inode: Option<u32>,
        path: Option<Vec<u8>>,
        t: &mut Vec<(Resource, Touch)>,
    ) {
        // A descriptor number reused without a close in the trace (dup2 over it, or a close
        // the trace missed) ends the old generation.
        if self.process(pid).fds.contains_key(&fd) {
            let old = self.process(pid).fds[&fd].generation;
            t.push((self.fd_resource(pid, fd, old), Touch::Delete));
        }
        let g = self.fd_gen.entry((pid, fd)).or_insert(0);
        *g += 1;
        let generation = *g;
        self.process(pid).fds.insert(
            fd,
            FdEntry {
                inode,
                pos: 0,
                path,
                generation,
            },
        );
        t.push((self.fd_resource(pid, fd, generation), Touch::Create));
    }
}

fn name_of(i: &Initial) -> &[u8] {
    match i {
        Initial::Dir(p) | Initial::File(p, _) | Initial::Symlink(p, _) => p,
    }
}

/// The components of a path, `.` and empty ones dropped.
fn components(p: &[u8]) -> impl Iterator<Item = &[u8]> {
    p.split(|&b| b == b'/').filter(|c| !c.is_empty() && *c != b".")
}

/// `a/./b//../c` -> `/a/c` (absolute, lexical).
pub fn normalize(p: &[u8]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = Vec::new();
    for c in components(p) {
        if c == b".." {
            parts.pop();
        } else {
            parts.push(c);
        }
    }
    let mut out = Vec::with_capacity(p.len() + 1);
    for c in &parts {
        out.push(b'/');
        out.extend_from_slice(c);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}
