//! `iolearn trace import-strace` and `iolearn trace calls`: system-call traces in and out of
//! Parquet (`iolearn_trace::sys`).

use anyhow::{bail, Result};
use iolearn_probe::syscalls::Captured;
use iolearn_trace::sys::{parquet, strace, Call, Data, SysRecord, SysTrace};
use iolearn_trace::{ReadOptions, MAX_TRACE_BYTES};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Import `strace -f -ttt -T -y` output into a Parquet system-call trace.
pub fn import_strace(input: &Path, out: &Path, skip_bad: bool) -> Result<()> {
    iolearn_safeio::check_target(out)?;
    if iolearn_safeio::same_file(input, out) {
        bail!("{}: is the input; write to another file", out.display());
    }
    let bytes = iolearn_safeio::read(input, MAX_TRACE_BYTES)?;
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        let line = 1 + bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count();
        anyhow::anyhow!("{}: line {line}: text: not UTF-8", input.display())
    })?;
    let imp = strace::parse(text, input, ReadOptions { skip_bad })?;
    let mut trace = imp.trace;
    trace.meta.command = format!("strace import of {}", input.display());
    iolearn_safeio::write_with(out, |w| {
        parquet::write(&trace, w).map(|_| ()).map_err(std::io::Error::other)
    })?;
    eprintln!(
        "iolearn: {} calls of {} threads in {} processes -> {}{}",
        trace.records.len(),
        trace.threads().len(),
        processes(&trace),
        out.display(),
        match (&imp.first_error, imp.skipped) {
            (Some(e), n) => format!(" ({n} bad lines skipped; the first: {e})"),
            _ => String::new(),
        }
    );
    Ok(())
}

fn processes(t: &SysTrace) -> usize {
    t.records
        .iter()
        .map(|r| r.pid)
        .collect::<std::collections::HashSet<_>>()
        .len()
}

/// A summary of a system-call trace, a line per call: how many, how many failed, bytes
/// moved, latency.
pub fn calls(path: &Path) -> Result<()> {
    let t = parquet::read(path)?;
    let mut by: BTreeMap<String, (u64, u64, u64, Vec<u64>)> = BTreeMap::new();
    for r in &t.records {
        let e = by.entry(r.call_name().to_string()).or_default();
        e.0 += 1;
        e.1 += u64::from(!r.ok());
        if r.call.is_some_and(Call::carries_data) && r.ret > 0 {
            e.2 = e.2.saturating_add(r.ret as u64);
        }
        if let Some(l) = r.latency_ns() {
            e.3.push(l);
        }
    }
    let span = match (t.records.first(), t.records.iter().filter_map(|r| r.exit_ns).max()) {
        (Some(a), Some(b)) => b.saturating_sub(a.enter_ns) as f64 / 1e9,
        _ => 0.0,
    };
    // writeln!, not println!: a closed pipe (`| head`) is an error main() ignores, not a panic.
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{}: {} calls, {} threads, {} processes, {span:.3} s; source {}, buffers {}, lost {}",
        iolearn_safeio::printable(&path.display().to_string()),
        t.records.len(),
        t.threads().len(),
        processes(&t),
        t.meta.source,
        t.meta.buffers,
        t.meta.lost
    )?;
    writeln!(
        out,
        "{:<18} {:>10} {:>8} {:>14} {:>10} {:>10}",
        "call", "calls", "failed", "bytes", "mean_us", "p99_us"
    )?;
    let mut rows: Vec<_> = by.into_iter().collect();
    rows.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(&b.0)));
    for (name, (n, failed, bytes, mut lat)) in rows {
        lat.sort_unstable();
        let mean = lat.iter().map(|&l| l as f64).sum::<f64>() / lat.len().max(1) as f64 / 1e3;
        let p99 = lat
            .get((lat.len() * 99 / 100).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0) as f64
            / 1e3;
        writeln!(
            out,
            "{:<18} {n:>10} {failed:>8} {bytes:>14} {mean:>10.1} {p99:>10.1}",
            iolearn_safeio::printable(&name)
        )?;
    }
    Ok(())
}

/// `iolearn replay syscalls`.
#[derive(clap::Args)]
pub struct ReplayArgs {
    /// A Parquet system-call trace.
    trace: std::path::PathBuf,
    /// The directory to replay under (it stands for `/`: nothing outside it is touched).
    #[arg(long)]
    target: std::path::PathBuf,
    /// Ordering: artc (ROOT's resource rules), to (temporally ordered), st (single thread), uc
    /// (unconstrained).
    #[arg(long, default_value = "artc", value_parser = clap::builder::PossibleValuesParser::new(Mode::NAMES))]
    mode: String,
    /// Pace: afap (as fast as possible), natural (the original's idle time between calls, and
    /// the time the calls the replay cannot make took), or
    /// scale=X (that idle time times X, 0 to 1000).
    #[arg(long, default_value = "afap", value_parser = timing)]
    timing: Timing,
    /// Leave the target as it is (no delta init of the tree the trace started from).
    #[arg(long)]
    no_init: bool,
    /// Per-call results as Parquet (id, thread, call, traced and replayed return, agreement,
    /// start and end).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Verification level 3: compare the final state of every name the trace used with the
    /// same names under ROOT (where the program ran: `/` right after the capture). The exit
    /// status is 1 when they differ.
    #[arg(long, value_name = "ROOT")]
    compare_with: Option<std::path::PathBuf>,
}

use iolearn_replay::artc::{self, Mode, Timing};

fn timing(s: &str) -> Result<Timing, String> {
    match s {
        "afap" => Ok(Timing::Afap),
        "natural" => Ok(Timing::Scaled(1.0)),
        _ => {
            let x = s
                .strip_prefix("scale=")
                .ok_or_else(|| format!("{s:?}: afap, natural or scale=X"))?;
            match x.parse::<f64>() {
                Ok(v) if (0.0..=1000.0).contains(&v) => Ok(Timing::Scaled(v)),
                _ => Err(format!("scale={x}: a factor from 0 to 1000")),
            }
        }
    }
}

/// Replay a system-call trace and report.
pub fn replay(a: ReplayArgs) -> Result<()> {
    let mode = Mode::parse(&a.mode).expect("clap checked the mode");
    if let Some(out) = &a.out {
        iolearn_safeio::check_target(out)?;
    }
    let target = artc::run::check_target(&a.target).map_err(anyhow::Error::msg)?;
    let trace = parquet::read(&a.trace)?;
    // The data the trace kept (`--buffers full`): written by the replay, and what its reads
    // are checked against.
    let side_path = data_file(&a.trace);
    let side_bytes = match trace.meta.buffers.as_str() {
        "full" => Some(iolearn_safeio::read(&side_path, MAX_DATA_BYTES)?),
        _ => None,
    };
    if let (Some(b), Some((len, hash))) = (&side_bytes, trace.meta.data_file) {
        if b.len() as u64 != len || iolearn_trace::sys::hash(b) != hash {
            bail!(
                "{}: not the data of {} (the trace's is {len} bytes with xxh3 {hash:016x})",
                side_path.display(),
                a.trace.display()
            );
        }
    }
    let side = artc::Side(side_bytes.as_deref());
    side.check(&trace)
        .map_err(|e| anyhow::anyhow!("{}: {e} ({})", a.trace.display(), side_path.display()))?;
    let plan = artc::compile(&trace, mode, artc::Rules::default(), &[]);
    if !a.no_init {
        let (made, removed) = artc::init(&target, &plan).map_err(anyhow::Error::msg)?;
        let bytes = artc::init_data(&target, &plan, side).map_err(anyhow::Error::msg)?;
        eprintln!(
            "iolearn: target ready: {made} entries made or grown, {removed} removed{}",
            if bytes > 0 {
                format!(", {} of what the trace read written back", iolearn_safeio::human(bytes))
            } else {
                String::new()
            }
        );
    }
    let report = artc::run(&trace, &plan, &target, a.timing, side).map_err(anyhow::Error::msg)?;
    let mut mismatched: BTreeMap<String, usize> = BTreeMap::new();
    for (r, o) in trace.records.iter().zip(&report.outcomes) {
        if o.replayed && !o.ok {
            *mismatched.entry(r.call_name().to_string()).or_default() += 1;
        }
    }
    let traced_ns = match (
        trace.records.first(),
        trace.records.iter().filter_map(|r| r.exit_ns).max(),
    ) {
        (Some(f), Some(l)) => l.saturating_sub(f.enter_ns),
        _ => 0,
    };
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{}: {} calls, {} threads, mode {}: replayed {} ({} not replayed), {} failed; wall {:.3} s (traced {:.3} s), {} cross-thread edges",
        iolearn_safeio::printable(&a.trace.display().to_string()),
        trace.records.len(),
        plan.threads.len(),
        a.mode,
        trace.records.len() - report.skipped(),
        report.skipped(),
        report.failed(),
        report.wall_ns as f64 / 1e9,
        traced_ns as f64 / 1e9,
        plan.edges()
    )?;
    let (checked, differ) = report.data_checked();
    if checked > 0 {
        writeln!(
            out,
            "  data: {checked} reads checked, {differ} returned other bytes than traced"
        )?;
    }
    for (call, n) in &mismatched {
        writeln!(
            out,
            "  {n} {} calls returned other than traced",
            iolearn_safeio::printable(call)
        )?;
    }
    if let Some(path) = &a.out {
        iolearn_safeio::write_with(path, |w| {
            write_outcomes(&trace, &plan, &report, w).map_err(std::io::Error::other)
        })?;
    }
    if let Some(root) = &a.compare_with {
        // Contents only where the trace kept every byte written.
        let all_kept = side_bytes.is_some()
            && !trace
                .records
                .iter()
                .any(|r| r.call.is_some_and(Call::writes) && r.data == Data::Unreadable);
        let v = artc::compare(&trace, &plan, root, &target, all_kept).map_err(anyhow::Error::msg)?;
        writeln!(
            out,
            "  final state: {} names compared with {}, {} differ{}",
            v.compared,
            root.display(),
            v.differ.len(),
            if side_bytes.is_none() {
                " (file contents not compared: the trace kept no data)"
            } else {
                ""
            }
        )?;
        for (name, was, is) in v.differ.iter().take(20) {
            writeln!(
                out,
                "    {}: {was:?} there, {is:?} here",
                iolearn_safeio::printable(&String::from_utf8_lossy(name))
            )?;
        }
        if !v.differ.is_empty() {
            out.flush()?;
            std::process::exit(1);
        }
    }
    Ok(())
}

const OUTCOMES: &str = "message outcome {
    REQUIRED INT64 id (INTEGER(64, false));
    REQUIRED INT32 thread (INTEGER(32, false));
    REQUIRED BYTE_ARRAY call (STRING);
    REQUIRED INT64 traced_ret;
    REQUIRED INT64 replay_ret;
    REQUIRED BOOLEAN replayed;
    REQUIRED BOOLEAN ok;
    OPTIONAL BOOLEAN data_ok;
    REQUIRED INT64 start_ns (INTEGER(64, false));
    REQUIRED INT64 end_ns (INTEGER(64, false));
}";

fn write_outcomes(
    trace: &SysTrace,
    plan: &artc::Plan,
    report: &artc::Report,
    w: &mut (dyn std::io::Write + Send),
) -> Result<(), String> {
    use ::parquet::data_type::{BoolType, ByteArray, ByteArrayType, Int32Type, Int64Type};
    use ::parquet::file::properties::WriterProperties;
    use ::parquet::file::writer::SerializedFileWriter;
    let pq = |e: ::parquet::errors::ParquetError| e.to_string();
    let schema = std::sync::Arc::new(::parquet::schema::parser::parse_message_type(OUTCOMES).map_err(pq)?);
    let props = std::sync::Arc::new(
        WriterProperties::builder()
            .set_compression(::parquet::basic::Compression::SNAPPY)
            .build(),
    );
    let mut file = SerializedFileWriter::new(w, schema, props).map_err(pq)?;
    let rs = &trace.records;
    let os = &report.outcomes;
    let mut group = file.next_row_group().map_err(pq)?;
    let mut k = 0;
    while let Some(mut col) = group.next_column().map_err(pq)? {
        match k {
            0 => col
                .typed::<Int64Type>()
                .write_batch(&rs.iter().map(|r| r.id as i64).collect::<Vec<_>>(), None, None),
            1 => col.typed::<Int32Type>().write_batch(
                &plan.thread_of.iter().map(|&t| t as i32).collect::<Vec<_>>(),
                None,
                None,
            ),
            2 => col.typed::<ByteArrayType>().write_batch(
                &rs.iter().map(|r| ByteArray::from(r.call_name())).collect::<Vec<_>>(),
                None,
                None,
            ),
            3 => col
                .typed::<Int64Type>()
                .write_batch(&rs.iter().map(|r| r.ret).collect::<Vec<_>>(), None, None),
            4 => col
                .typed::<Int64Type>()
                .write_batch(&os.iter().map(|o| o.ret).collect::<Vec<_>>(), None, None),
            5 => col
                .typed::<BoolType>()
                .write_batch(&os.iter().map(|o| o.replayed).collect::<Vec<_>>(), None, None),
            6 => col
                .typed::<BoolType>()
                .write_batch(&os.iter().map(|o| o.ok).collect::<Vec<_>>(), None, None),
            7 => col.typed::<BoolType>().write_batch(
                &os.iter().filter_map(|o| o.data_ok).collect::<Vec<_>>(),
                Some(&os.iter().map(|o| i16::from(o.data_ok.is_some())).collect::<Vec<_>>()),
                None,
            ),
            8 => col.typed::<Int64Type>().write_batch(
                &os.iter().map(|o| o.start_ns as i64).collect::<Vec<_>>(),
                None,
                None,
            ),
            _ => col.typed::<Int64Type>().write_batch(
                &os.iter().map(|o| o.end_ns as i64).collect::<Vec<_>>(),
                None,
                None,
            ),
        }
        .map_err(pq)?;
        col.close().map_err(pq)?;
        k += 1;
    }
    group.close().map_err(pq)?;
    file.close().map_err(pq)?;
    Ok(())
}

/// The largest data side file a replay loads (it is held in memory, so that a write's data is
/// at hand without a read of its own).
const MAX_DATA_BYTES: u64 = 16 << 30;

/// `iolearn trace record`.
#[derive(clap::Args)]
pub struct RecordArgs {
    /// The Parquet trace to write (with `--buffers full`, the data goes to `OUT.data` beside it).
    #[arg(long, short)]
    out: PathBuf,
    /// An existing process to trace instead of a command.
    #[arg(long)]
    pid: Option<u32>,
    /// Ring buffer, MiB (a power of two; Re-Animator lost nothing at 64).
    #[arg(long, default_value_t = 64)]
    ring_mb: u32,
    /// The data each read and write moved: none, hash (xxh3-64, taken in user space) or full
    /// (the bytes, in `OUT.data`).
    #[arg(long, default_value = "none", value_parser = clap::builder::PossibleValuesParser::new(["none", "hash", "full"]))]
    buffers: String,
    /// Hold the program (a freezer cgroup) while the ring is over a quarter full, so that no
    /// call is lost; without it, what the ring has no room for is counted and reported.
    #[arg(long)]
    backpressure: bool,
    /// The command and its arguments.
    #[arg(last = true)]
    command: Vec<String>,
}

/// The data side file of a trace: `T.parquet.data`.
pub fn data_file(trace: &Path) -> PathBuf {
    let mut name = trace.as_os_str().to_owned();
    name.push(".data");
    PathBuf::from(name)
}

/// What the capture's callback builds: the records, and each call's data as it arrives.
struct Sink {
    records: Vec<SysRecord>,
    buffers: Buffers,
    /// A data-moving call's bytes so far, by thread: (its entry time, the bytes, complete so far).
    pending: HashMap<u32, (u64, Vec<u8>, bool)>,
    side: Option<iolearn_safeio::Staged>,
    side_len: u64,
    /// Of everything written to the side file.
    side_hash: xxhash_rust::xxh3::Xxh3,
    failed: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Buffers {
    None,
    Hash,
    Full,
}

impl Sink {
    fn take(&mut self, e: Captured<'_>) {
        match e {
            Captured::Data {
                enter_ns,
                tid,
                offset,
                bytes,
            } => {
                let p = self.pending.entry(tid).or_insert((enter_ns, Vec::new(), true));
                if p.0 != enter_ns {
                    // A new call (the thread's last one took its bytes, or its record never
                    // came): the buffer is reused.
                    p.0 = enter_ns;
                    p.1.clear();
                    p.2 = true;
                }
                p.2 &= offset == p.1.len() as u64;
                if p.2 {
                    p.1.extend_from_slice(bytes);
                }
            }
            Captured::Call(e) => {
                let mut r = e.to_record();
                if self.buffers != Buffers::None && r.call.is_some_and(Call::moves_data) && r.ret > 0 {
                    let bytes = match self.pending.get_mut(&e.tid) {
                        Some((at, bytes, true)) if *at == e.enter_ns && bytes.len() as u64 == r.ret as u64 => {
                            Some(std::mem::take(bytes))
                        }
                        _ => None,
                    };
                    r.data = match bytes {
                        Some(mut b) => {
                            let d = self.keep(&b);
                            // The buffer goes back for the thread's next call.
                            b.clear();
                            if let Some(p) = self.pending.get_mut(&e.tid) {
                                p.1 = b;
                            }
                            d
                        }
                        None => Data::Unreadable,
                    };
                }
                self.records.push(r);
            }
        }
    }

    fn keep(&mut self, bytes: &[u8]) -> Data {
        match (self.buffers, &mut self.side) {
            (Buffers::Full, Some(side)) => {
                if self.failed.is_none() {
                    if let Err(e) = side.write_all(bytes) {
                        self.failed = Some(e.to_string());
                    }
                    self.side_hash.update(bytes);
                }
                let d = Data::Bytes {
                    offset: self.side_len,
                    len: bytes.len() as u64,
                };
                self.side_len += bytes.len() as u64;
                d
            }
            _ => Data::Hash(iolearn_trace::sys::hash(bytes)),
        }
    }
}

/// This process and the ones it runs under, up to init.
fn ancestors() -> Vec<u32> {
    let mut out = vec![std::process::id()];
    let mut p = std::process::id();
    while p > 1 && out.len() < 4096 {
        match iolearn_probe::freezer::stat_field(&p.to_string(), 1).and_then(|pp| u32::try_from(pp).ok()) {
            Some(pp) => {
                out.push(pp);
                p = pp;
            }
            None => break,
        }
    }
    out
}

/// `iolearn trace record`: a program's system calls, captured with eBPF.
pub fn record(a: RecordArgs) -> Result<()> {
    use iolearn_probe::freezer::Freezer;
    use iolearn_probe::syscalls::{Hold, Options, SyscallWatch};
    use std::sync::atomic::Ordering::Relaxed;
    use std::sync::{Arc, Mutex};
    let out = &a.out;
    iolearn_safeio::check_target(out)?;
    if !a.ring_mb.is_power_of_two() || !(1..=2048).contains(&a.ring_mb) {
        bail!("--ring-mb: a power of two from 1 to 2048, got {}", a.ring_mb);
    }
    let buffers = match a.buffers.as_str() {
        "hash" => Buffers::Hash,
        "full" => Buffers::Full,
        _ => Buffers::None,
    };
    match (a.pid, a.command.as_slice()) {
        (Some(_), [_, ..]) => bail!("give a command after -- or --pid P, not both"),
        (None, []) => bail!(
            "nothing to record: give a command after -- (iolearn trace record -o T.parquet -- CMD ARGS) or --pid P"
        ),
        // SAFETY: kill with signal 0 only checks that the process exists.
        (Some(p), [])
            if p == 0
                || p > i32::MAX as u32
                || unsafe { libc::kill(p as i32, 0) } != 0
                    && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) =>
        {
            bail!("--pid {p}: no such process");
        }
        _ => {}
    }
    let side_path = data_file(out);
    let side = match buffers {
        Buffers::Full => Some(iolearn_safeio::Staged::create(&side_path)?),
        _ => None,
    };
    let sink = Arc::new(Mutex::new(Sink {
        records: Vec::new(),
        buffers,
        pending: HashMap::new(),
        side,
        side_len: 0,
        side_hash: xxhash_rust::xxh3::Xxh3::new(),
        failed: None,
    }));
    let into = sink.clone();
    let on_event = move |e: Captured<'_>| into.lock().expect("sink").take(e);
    let ring_bytes = a.ring_mb << 20;
    // A program a capture that died left frozen is let go first (its watchdog should have).
    let released = iolearn_probe::freezer::recover();
    if released > 0 {
        eprintln!("iolearn: thawed and removed {released} freezer groups left by an earlier capture");
    }
    if let (true, Some(p)) = (a.backpressure, a.pid) {
        // Holding iolearn (its drain could then never let go), one of the processes it runs
        // under, or init would hang the machine's session or the machine.
        if p == 1 || ancestors().contains(&p) {
            bail!("--pid {p} --backpressure: {p} is init, iolearn or a process iolearn runs under; it cannot be held");
        }
    }
    // The process and its threads (not children it already has; those it starts from now on
    // join it); or, for a command, the command as it starts.
    let freezer = match a.backpressure {
        true => Some(Arc::new(
            Freezer::create(a.pid, Path::new("/proc/self/exe")).map_err(|e| anyhow::anyhow!("--backpressure: {e}"))?,
        )),
        false => None,
    };
    let hold = freezer.as_ref().map(|f| {
        let f = f.clone();
        Hold {
            high: u64::from(ring_bytes) / 4,
            low: u64::from(ring_bytes) / 16,
            set: Box::new(move |frozen| f.set(frozen)),
        }
    });
    let opts = |children_of| Options {
        ring_bytes,
        children_of,
        data: buffers != Buffers::None,
        hold,
    };
    let stop = iolearn_tune::install_signal_handlers();
    // Where the traced processes start: their relative names are resolved from here.
    let cwd = match a.pid {
        Some(p) => std::fs::read_link(format!("/proc/{p}/cwd")).ok(),
        None => std::env::current_dir().ok(),
    };
    let cwd = match cwd.as_deref().and_then(Path::to_str) {
        Some(c) => c.to_string(),
        None => {
            eprintln!("iolearn: the starting directory is unknown or not UTF-8: relative names replay from /");
            String::new()
        }
    };
    let (lost, what) = if let Some(p) = a.pid {
        let watch = SyscallWatch::start(&[p], opts(None), on_event)?;
        eprintln!("iolearn: recording process {p} (and what it starts) until it exits or SIGINT");
        // SAFETY: as above.
        while !stop.load(Relaxed) && watch.running() && unsafe { libc::kill(p as i32, 0) } == 0 {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        (watch.stop()?, format!("process {p}"))
    } else {
        let (program, args) = a.command.split_first().expect("checked above");
        // Attached first, following this process's children from their creation: the
        // command's every call is seen, from its exec on (and the few calls between fork
        // and exec, which are the child's own). iolearn starts no other process meanwhile.
        let watch = SyscallWatch::start(&[], opts(Some(std::process::id())), on_event)?;
        let mut cmd = std::process::Command::new(program);
        cmd.args(args);
        if let Some(f) = &freezer {
            let f = f.clone();
            use std::os::unix::process::CommandExt;
            // SAFETY: join_self only opens, writes and closes (async-signal safe).
            unsafe { cmd.pre_exec(move || f.join_self()) };
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => bail!("{program}: {e}"),
        };
        // Wait for the command, capturing all the while (a held program is let go by the
        // capture as it drains). A signal to iolearn is passed on to the command once.
        let mut passed_on = false;
        let status = loop {
            if let Some(s) = child.try_wait()? {
                break s;
            }
            // A capture that ended on an error is reported now, not when the command ends.
            if !watch.running() {
                break child.try_wait()?.unwrap_or_default();
            }
            if stop.load(Relaxed) && !passed_on {
                // SAFETY: signalling the child this function started and has not reaped.
                unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
                passed_on = true;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        let lost = watch.stop()?;
        if !status.success() {
            eprintln!("iolearn: {program} exited with {status}");
        }
        (lost, a.command.join(" "))
    };
    drop(freezer);
    let mut sink = match Arc::try_unwrap(sink) {
        Ok(m) => m.into_inner().expect("sink"),
        Err(_) => bail!("the capture still holds its records"),
    };
    if let Some(e) = sink.failed.take() {
        bail!("{e}");
    }
    let mut records = std::mem::take(&mut sink.records);
    let t0 = records.iter().map(|r| r.enter_ns).min().unwrap_or(0);
    for r in &mut records {
        r.enter_ns -= t0;
        r.exit_ns = r.exit_ns.map(|x| x.saturating_sub(t0));
    }
    let mut trace = SysTrace {
        records,
        meta: iolearn_trace::sys::Meta {
            source: "ebpf".into(),
            buffers: a.buffers.clone(),
            lost: lost.records,
            lost_by_call: lost
                .by_nr
                .iter()
                .map(|&(nr, n)| {
                    let name = Call::by_x86_64_nr(nr).map_or_else(|| format!("syscall_{nr}"), |c| c.name().to_string());
                    (name, n)
                })
                .collect(),
            command: what,
            cwd,
            data_file: (buffers == Buffers::Full).then(|| (sink.side_len, sink.side_hash.digest())),
        },
    };
    trace.renumber();
    // The data first: a trace never names bytes that are not there.
    if let Some(side) = sink.side.take() {
        side.commit()?;
    }
    iolearn_safeio::write_with(out, |w| {
        parquet::write(&trace, w).map(|_| ()).map_err(std::io::Error::other)
    })?;
    let unreadable = trace.records.iter().filter(|r| r.data == Data::Unreadable).count();
    eprintln!(
        "iolearn: {} calls of {} threads in {} processes -> {}{}; lost {}{}{}{}",
        trace.records.len(),
        trace.threads().len(),
        processes(&trace),
        out.display(),
        match buffers {
            Buffers::Full => format!(
                " (data: {} in {})",
                iolearn_safeio::human(sink.side_len),
                side_path.display()
            ),
            _ => String::new(),
        },
        lost.records,
        if lost.compat > 0 {
            format!(", {} 32-bit calls not decoded", lost.compat)
        } else {
            String::new()
        },
        if buffers != Buffers::None {
            format!(", data of {unreadable} calls not kept ({} for want of room)", lost.data)
        } else {
            String::new()
        },
        if a.backpressure {
            format!(", held {} times", lost.holds)
        } else {
            String::new()
        }
    );
    for (name, n) in &trace.meta.lost_by_call {
        eprintln!("iolearn:   lost {n} {name} calls");
    }
    Ok(())
}
