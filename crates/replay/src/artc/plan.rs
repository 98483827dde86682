//! Compile a system-call trace into a replay plan: which replay thread runs each action, and
//! which actions of other threads it waits for (ROOT's ordering rules, §2.3.2, over the
//! resources [`super::model`] finds).
//!
//! One refinement over ARTC's rules as written: an edge `a < b` is only kept when `a`
//! returned before `b` was issued in the original. Calls that overlapped there had no order
//! the program could rely on (Re-Animator's own replayer lets them reorder too), and forcing
//! one would serialize what ran concurrently.

use super::model::{Model, Resource, Touch};
use iolearn_trace::sys::{Call, SysTrace};
use std::collections::HashMap;

/// How to order the replay (ROOT §2.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A thread per traced thread, and the resource rules ([`Rules`]).
    Artc,
    /// A thread per traced thread, each call issued only after the one before it in the
    /// trace was issued (no reordering, overlap kept).
    TemporallyOrdered,
    /// One thread, the trace's order, nothing concurrent.
    SingleThreaded,
    /// A thread per traced thread, nothing between threads.
    Unconstrained,
}

impl Mode {
    /// The names the CLI takes: `artc`, `to`, `st`, `uc`.
    pub const NAMES: [&'static str; 4] = ["artc", "to", "st", "uc"];

    /// By name.
    pub fn parse(s: &str) -> Option<Mode> {
        Some(match s {
            "artc" => Mode::Artc,
            "to" => Mode::TemporallyOrdered,
            "st" => Mode::SingleThreaded,
            "uc" => Mode::Unconstrained,
            _ => return None,
        })
    }
}

/// ARTC's rules (thread order always holds; path stage and name ordering go together).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// Sequential order over every action on a file (directories included).
    pub file_seq: bool,
    /// Stage and name order over paths: a name's creation before its uses before its
    /// deletion, and one generation's last action before the next generation's first.
    pub path_stage: bool,
    /// Stage order over descriptors (open before uses before close).
    pub fd_stage: bool,
    /// Sequential order over descriptors.
    pub fd_seq: bool,
    /// A total order (ARTC's strongest, off by default).
    pub program_seq: bool,
}

impl Default for Rules {
    /// ARTC's default: every rule but `program_seq`.
    fn default() -> Self {
        Rules {
            file_seq: true,
            path_stage: true,
            fd_stage: true,
            fd_seq: true,
            program_seq: false,
        }
    }
}

/// What to replay, in which thread, after what.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The mode compiled for.
    pub mode: Mode,
    /// Each replay thread's actions (indices into the trace's records), in order.
    pub threads: Vec<Vec<u32>>,
    /// Replay thread of each action.
    pub thread_of: Vec<u32>,
    /// Actions of other threads each action waits to see completed (sorted, no duplicates).
    pub deps: Vec<Vec<u32>>,
    /// The original's idle time before each action once what it waited for had finished,
    /// ns: what natural-speed replay sleeps.
    pub predelay_ns: Vec<u64>,
    /// Absolute paths of each action's `path` and `path2` (resolved against the traced
    /// process's directory and `dirfd`), for the executor.
    pub abs_path: Vec<Option<Vec<u8>>>,
    /// Same for `path2` (a symlink's target text is kept as it is).
    pub abs_path2: Vec<Option<Vec<u8>>>,
    /// The descriptor resources (ids of [`Resource::Fd`]) each action's `fd` and `fd2` name
    /// when it starts: what the replay looks its files up by, so that a number reused while
    /// its old holder is still open in the replay names the right file.
    pub fd_use: Vec<[Option<u32>; 2]>,
    /// The descriptor resources an action makes (open, dup, the new end of dup2).
    pub fd_new: Vec<[Option<u32>; 2]>,
    /// For each fork: the parent's descriptors the child starts with (parent's id, child's id).
    pub fork_copies: HashMap<u32, Vec<(u32, u32)>>,
    /// Descriptors an action ends other than by closing them (exit_group, a number reused).
    pub fd_drop: HashMap<u32, Vec<u32>>,
    /// The tree before the trace, as far as its calls show it: what replay starts from.
    pub initial: Vec<super::model::Initial>,
    /// Names the trace creates that the initial tree lacks (removed from a target that has
    /// them, so that the replay's creations succeed as the original's did).
    pub created: Vec<Vec<u8>>,
    /// Bytes of files from before the trace, as its reads returned them (kept data only):
    /// (path, file offset, offset in the data side file, length).
    pub initial_data: Vec<(Vec<u8>, u64, u64, u64)>,
}

impl Plan {
    /// Cross-thread edges.
    pub fn edges(&self) -> usize {
        self.deps.iter().map(Vec::len).sum()
    }
}

#[derive(Default)]
struct Series {
    /// Its first action, if that created it.
    created: Option<u32>,
    /// Every action so far (stage: a delete waits for all).
    all: Vec<u32>,
    /// Sequential order: actions a later one may still have to wait for, each with the
    /// earliest return of an action already ordered after it (once a later action begins after
    /// that, the order holds through it and the entry goes).
    frontier: Vec<(u32, u64)>,
}

/// Compile `trace` for `mode` (rules apply to ARTC only). `seed`: the tree before the trace,
/// from a snapshot, when there is one (else the model infers it from the calls).
pub fn compile(trace: &SysTrace, mode: Mode, rules: Rules, seed: &[super::model::Initial]) -> Plan {
    let rs = &trace.records;
    let n = rs.len();
    let mut model = Model::new();
    model.start_in(trace.meta.cwd.as_bytes());
    for entry in seed {
        model.seed(entry);
    }
    // Threads in order of first appearance.
    let mut tid_index: HashMap<u32, u32> = HashMap::new();
    let mut threads: Vec<Vec<u32>> = Vec::new();
    let mut thread_of = Vec::with_capacity(n);
    for (i, r) in rs.iter().enumerate() {
        let t = if mode == Mode::SingleThreaded {
            0
        } else {
            let next = tid_index.len() as u32;
            *tid_index.entry(r.tid).or_insert(next)
        };
        if threads.len() <= t as usize {
            threads.push(Vec::new());
        }
        threads[t as usize].push(i as u32);
        thread_of.push(t);
    }
    let done_before = |a: u32, b: usize| rs[a as usize].exit_ns.is_some_and(|x| x <= rs[b].enter_ns);
    // The fork that made each process: its first calls come after it (the descriptors it
    // inherits are the parent's as they were then).
    let mut forked_by: HashMap<u32, u32> = HashMap::new();
    let mut started: std::collections::HashSet<u32> = std::collections::HashSet::new();
    let mut series: HashMap<Resource, Series> = HashMap::new();
    // Path name -> the last action of its latest generation, and that generation.
    let mut name_last: HashMap<Vec<u8>, (u32, u32)> = HashMap::new();
    let mut deps: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut fd_use = Vec::with_capacity(n);
    let mut fd_new = Vec::with_capacity(n);
    let mut fork_copies = HashMap::new();
    let mut fd_drop = HashMap::new();
    let mut abs_path = Vec::with_capacity(n);
    let mut abs_path2 = Vec::with_capacity(n);
    for (i, r) in rs.iter().enumerate() {
        let dirfd2 = if matches!(r.call, Some(Call::Rename | Call::Link)) {
            r.dirfd
        } else {
            r.dirfd2
        };
        abs_path.push(r.path.as_deref().and_then(|p| model.absolute(r.pid, r.dirfd, p)));
        abs_path2.push(match r.call {
            Some(Call::Symlink | Call::Symlinkat) => r.path2.clone(),
            _ => r.path2.as_deref().and_then(|p| model.absolute(r.pid, dirfd2, p)),
        });
        let fd_id = |m: &mut Model, fd: Option<i32>| match fd.and_then(|f| m.current_fd(r.pid, f)) {
            Some(Resource::Fd(id)) => Some(id),
            _ => None,
        };
        // A call on `AT_EMPTY_PATH` and no name acts on its directory descriptor's own object.
        let on_dirfd =
            r.fd.is_none() && r.path.as_deref() == Some(b"") && r.flags.unwrap_or(0) & libc::AT_EMPTY_PATH as u64 != 0;
        let fd = if on_dirfd { r.dirfd } else { r.fd };
        fd_use.push([fd_id(&mut model, fd), fd_id(&mut model, r.fd2)]);
        let mut touches = model.apply(r);
        let made = match r.call {
            Some(Call::Pipe | Call::Pipe2) => [fd_id(&mut model, r.fd), fd_id(&mut model, r.fd2)],
            _ => [fd_id(&mut model, r.new_fd()), None],
        };
        fd_new.push(made);
        if !model.fork_copies.is_empty() {
            let pairs = model
                .fork_copies
                .iter()
                .filter_map(|p| match p {
                    (Resource::Fd(a), Resource::Fd(b)) => Some((*a, *b)),
                    _ => None,
                })
                .collect();
            fork_copies.insert(i as u32, pairs);
        }
        let ended: Vec<u32> = touches
            .iter()
            .filter_map(|(res, t)| match (res, t) {
                (Resource::Fd(id), Touch::Delete) if r.call != Some(Call::Close) => Some(*id),
                _ => None,
            })
            .collect();
        if !ended.is_empty() {
            fd_drop.insert(i as u32, ended);
        }
        // One touch per resource, the strongest (a create or delete over a use).
        touches.sort_by_key(|(res, t)| (*res, *t == Touch::Use));
        touches.dedup_by_key(|(res, _)| *res);
        if mode != Mode::Artc {
            continue;
        }
        let mut d: Vec<u32> = Vec::new();
        if rules.program_seq && i > 0 {
            d.push(i as u32 - 1);
        }
        if let Some(&f) = forked_by.get(&r.pid).filter(|_| started.insert(r.tid)) {
            d.push(f);
        }
        let fork = match r.call {
            Some(Call::Fork | Call::Vfork) => true,
            Some(Call::Clone | Call::Clone3) => r.flags.unwrap_or(0) & libc::CLONE_THREAD as u64 == 0,
            _ => false,
        };
        if fork && r.ret > 0 {
            forked_by.insert(r.ret as u32, i as u32);
        }
        for (res, touch) in touches {
            let (seq, stage) = match res {
                Resource::File(_) => (rules.file_seq, false),
                Resource::Path(_) => (false, rules.path_stage),
                Resource::Fd(_) => (rules.fd_seq, rules.fd_stage),
            };
            if !seq && !stage {
                continue;
            }
            let s = series.entry(res).or_default();
            // A name's creation orders what follows it even after a failed lookup of it in the
            // same generation.
            if touch == Touch::Create {
                s.created = Some(i as u32);
            }
            if s.all.is_empty() {
                // Name order: a path generation's first action after the last of the one before.
                if let (Resource::Path(id), true) = (res, stage) {
                    let (name, generation) = &model.path_names[id as usize];
                    if let Some(&(last, g)) = name_last.get(name) {
                        if g < *generation && done_before(last, i) {
                            d.push(last);
                        }
                    }
                }
            }
            if seq {
                // Wait for every earlier action that had returned before this one began, unless
                // one already ordered after it had returned too (then the order holds through
                // that one, which this action waits for or which is itself covered).
                let begin = rs[i].enter_ns;
                let end = rs[i].exit_ns.unwrap_or(u64::MAX);
                s.frontier.retain(|&(_, covered)| covered > begin);
                for (a, covered) in s.frontier.iter_mut() {
                    if done_before(*a, i) {
                        d.push(*a);
                        *covered = (*covered).min(end);
                    }
                }
                s.frontier.push((i as u32, u64::MAX));
            }
            if stage {
                if let Some(c) = s.created.filter(|_| touch != Touch::Create) {
                    if done_before(c, i) {
                        d.push(c);
                    }
                }
                if touch == Touch::Delete {
                    d.extend(s.all.iter().copied().filter(|&a| done_before(a, i)));
                }
            }
            s.all.push(i as u32);
            if let Resource::Path(id) = res {
                let (name, generation) = model.path_names[id as usize].clone();
                name_last.insert(name, (i as u32, generation));
            }
        }
        let me = thread_of[i];
        d.retain(|&a| thread_of[a as usize] != me);
        d.sort_unstable();
        d.dedup();
        deps[i] = d;
    }
    let predelay_ns = predelays(trace, &thread_of, &deps, mode);
    let initial = model.initial();
    let mut created = model.created_paths.clone();
    created.sort();
    created.dedup();
    Plan {
        fd_use,
        fd_new,
        fork_copies,
        fd_drop,
        initial,
        created,
        initial_data: model.initial_data(),
        mode,
        threads,
        thread_of,
        deps,
        predelay_ns,
        abs_path,
        abs_path2,
    }
}

/// The original's idle time before each action: from when it could have started (its
/// thread's previous call and everything it waits for had returned) to when it did.
fn predelays(trace: &SysTrace, thread_of: &[u32], deps: &[Vec<u32>], mode: Mode) -> Vec<u64> {
    let rs = &trace.records;
    let mut last_exit: HashMap<u32, u64> = HashMap::new();
    let mut out = Vec::with_capacity(rs.len());
    for (i, r) in rs.iter().enumerate() {
        let mut ready = last_exit.get(&thread_of[i]).copied();
        for &a in &deps[i] {
            let x = rs[a as usize].exit_ns.unwrap_or(rs[a as usize].enter_ns);
            ready = Some(ready.map_or(x, |y| y.max(x)));
        }
        if mode == Mode::TemporallyOrdered && i > 0 {
            let x = rs[i - 1].enter_ns;
            ready = Some(ready.map_or(x, |y| y.max(x)));
        }
        out.push(ready.map_or(0, |t| r.enter_ns.saturating_sub(t)));
        last_exit.insert(thread_of[i], r.exit_ns.unwrap_or(r.enter_ns));
    }
    out
}

/// Every resource's action series (for tests and `--explain`): a label
/// (`file#3`, `path(/a/b)@2`, `fd3@1` with the process), and its actions in order.
pub fn action_series(trace: &SysTrace) -> Vec<(String, Vec<u32>)> {
    let mut model = Model::new();
    let mut series: Vec<(Resource, Vec<u32>)> = Vec::new();
    let mut index: HashMap<Resource, usize> = HashMap::new();
    for (i, r) in trace.records.iter().enumerate() {
        let mut touches = model.apply(r);
        touches.sort_by_key(|(res, _)| *res);
        touches.dedup_by_key(|(res, _)| *res);
        for (res, _) in touches {
            let k = *index.entry(res).or_insert_with(|| {
                series.push((res, Vec::new()));
                series.len() - 1
            });
            series[k].1.push(i as u32);
        }
    }
    series
        .into_iter()
        .map(|(res, acts)| {
            let label = match res {
                Resource::File(i) => format!("file#{i}"),
                Resource::Path(id) => {
                    let (name, g) = &model.path_names[id as usize];
                    format!("path({})@{g}", String::from_utf8_lossy(name))
                }
                Resource::Fd(id) => {
                    let (pid, fd, g) = model.fd_names[id as usize];
                    format!("fd{fd}@{g} of {pid}")
                }
            };
            (label, acts)
        })
        .collect()
}
