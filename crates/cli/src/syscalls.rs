//! `iolearn trace import-strace` and `iolearn trace calls`: system-call traces in and out of
//! Parquet (`iolearn_trace::sys`).

use anyhow::{bail, Result};
use iolearn_trace::sys::{parquet, strace, Call, SysTrace};
use iolearn_trace::{ReadOptions, MAX_TRACE_BYTES};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

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
    /// Pace: afap (as fast as possible), natural (the original's idle time between calls), or
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
    let plan = artc::compile(&trace, mode, artc::Rules::default(), &[]);
    if !a.no_init {
        let (made, removed) = artc::init(&target, &plan).map_err(anyhow::Error::msg)?;
        eprintln!("iolearn: target ready: {made} entries made or grown, {removed} removed");
    }
    let report = artc::run(&trace, &plan, &target, a.timing).map_err(anyhow::Error::msg)?;
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
            7 => col.typed::<Int64Type>().write_batch(
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

/// `iolearn trace record`: a program's system calls, captured with eBPF.
pub fn record(out: &Path, ring_mb: u32, pid: Option<u32>, command: &[String]) -> Result<()> {
    use iolearn_probe::syscalls::SyscallWatch;
    use std::sync::{Arc, Mutex};
    iolearn_safeio::check_target(out)?;
    if !ring_mb.is_power_of_two() || !(1..=4096).contains(&ring_mb) {
        bail!("--ring-mb: a power of two from 1 to 4096, got {ring_mb}");
    }
    let records: Arc<Mutex<Vec<iolearn_trace::sys::SysRecord>>> = Arc::default();
    let sink = records.clone();
    let on_event = move |e: &iolearn_probe::syscalls::SyscallEvent| {
        sink.lock().expect("records").push(e.to_record());
    };
    let (lost, what) = match (pid, command) {
        (Some(p), []) => {
            // SAFETY: kill with signal 0 only checks that the process exists.
            if p == 0
                || unsafe { libc::kill(p as i32, 0) } != 0
                    && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
            {
                bail!("--pid {p}: no such process");
            }
            let watch = SyscallWatch::start(&[p], None, ring_mb << 20, on_event)?;
            eprintln!("iolearn: recording process {p} (and what it starts) until it exits or SIGINT");
            let stop = iolearn_tune::install_signal_handlers();
            // SAFETY: as above.
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && unsafe { libc::kill(p as i32, 0) } == 0 {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            (watch.stop()?, format!("process {p}"))
        }
        (None, [program, args @ ..]) => {
            // Attached first, following this process's children from their creation: the
            // command's every call is seen, from its exec on (and the few calls between fork
            // and exec, which are the child's own). iolearn starts no other process meanwhile.
            let watch = SyscallWatch::start(&[], Some(std::process::id()), ring_mb << 20, on_event)?;
            let mut child = match std::process::Command::new(program).args(args).spawn() {
                Ok(c) => c,
                Err(e) => bail!("{program}: {e}"),
            };
            let status = child.wait()?;
            let lost = watch.stop()?;
            if !status.success() {
                eprintln!("iolearn: {program} exited with {status}");
            }
            (lost, command.join(" "))
        }
        (Some(_), _) => bail!("give a command after -- or --pid P, not both"),
        (None, []) => bail!(
            "nothing to record: give a command after -- (iolearn trace record -o T.parquet -- CMD ARGS) or --pid P"
        ),
    };
    let mut records = std::mem::take(&mut *records.lock().expect("records"));
    let t0 = records.iter().map(|r| r.enter_ns).min().unwrap_or(0);
    for r in &mut records {
        r.enter_ns -= t0;
        r.exit_ns = r.exit_ns.map(|x| x.saturating_sub(t0));
    }
    let mut trace = SysTrace {
        records,
        meta: iolearn_trace::sys::Meta {
            source: "ebpf".into(),
            buffers: "none".into(),
            lost: lost.records,
            command: what,
        },
    };
    trace.renumber();
    iolearn_safeio::write_with(out, |w| {
        parquet::write(&trace, w).map(|_| ()).map_err(std::io::Error::other)
    })?;
    eprintln!(
        "iolearn: {} calls of {} threads in {} processes -> {}; lost {}{}",
        trace.records.len(),
        trace.threads().len(),
        processes(&trace),
        out.display(),
        lost.records,
        if lost.compat > 0 {
            format!(", {} 32-bit calls not decoded", lost.compat)
        } else {
            String::new()
        }
    );
    for (nr, n) in &lost.by_nr {
        let name = iolearn_trace::sys::Call::by_x86_64_nr(*nr).map_or("?", |c| c.name());
        eprintln!("iolearn:   lost {n} {name} calls");
    }
    Ok(())
}
