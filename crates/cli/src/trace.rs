//! `iolearn trace`: block trace tools, and system-call traces in and out (`crate::syscalls`).

use crate::args;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use iolearn_trace::generate::{family, generate, FamilyRanges, Spec};
use iolearn_trace::stats::TraceStats;
use iolearn_trace::tools::{busiest, cut_count, cut_time, rerate, Busy};
use iolearn_trace::{binary, linnos, read_file, BlockIo, Format, ReadOptions};
use std::path::PathBuf;

/// Trace tools.
#[derive(Subcommand)]
pub enum TraceCommand {
    /// The summary Heimdall's tools print (counts, R:W, rates, sizes, binned rates).
    Stats(Input),
    /// Keep a time range (--from/--seconds) or a count (--skip/--count) of I/Os.
    Cut {
        #[command(flatten)]
        input: Input,
        /// Start, seconds from the trace's first arrival.
        #[arg(long, allow_negative_numbers = true, conflicts_with_all = ["skip", "count"], value_parser = args::offset_seconds)]
        from: Option<f64>,
        /// Length, seconds.
        #[arg(long, allow_negative_numbers = true, requires = "from", value_parser = args::seconds)]
        seconds: Option<f64>,
        /// I/Os to skip.
        #[arg(long, allow_negative_numbers = true)]
        skip: Option<usize>,
        /// I/Os to keep.
        #[arg(long, allow_negative_numbers = true)]
        count: Option<usize>,
        #[command(flatten)]
        output: Output,
    },
    /// The busiest window of a given length (by I/Os or bytes), written out.
    Busiest {
        #[command(flatten)]
        input: Input,
        /// Window, seconds.
        #[arg(long, allow_negative_numbers = true, default_value_t = 60.0, value_parser = args::seconds)]
        seconds: f64,
        /// Count I/Os or bytes.
        #[arg(long, value_enum, default_value_t = By::Ios)]
        by: By,
        #[command(flatten)]
        output: Output,
    },
    /// Scale the intensity: --factor 2 makes arrivals twice as dense.
    Rerate {
        #[command(flatten)]
        input: Input,
        /// Intensity factor (1e-6 to 1e6).
        #[arg(long, allow_negative_numbers = true, value_parser = args::factor)]
        factor: f64,
        #[command(flatten)]
        output: Output,
    },
    /// Change format.
    Convert {
        #[command(flatten)]
        input: Input,
        #[command(flatten)]
        output: Output,
    },
    /// A synthetic trace: load, read share, sizes, sequential share, skew and burstiness as
    /// asked (the defaults: a mixed trace at 1,000 I/Os per second in bursts).
    Generate {
        #[command(flatten)]
        spec: GenArgs,
        #[command(flatten)]
        output: Output,
    },
    /// A family of synthetic traces drawn over wide ranges (load light to saturating, read- to
    /// write-heavy, small to large I/Os, calm to bursty), one file each plus `family.json`
    /// (every member's settings). Families with different seeds share no trace: tune on one,
    /// report on another.
    Family {
        /// Seed of the family.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Traces in the family.
        #[arg(long, default_value_t = 12, value_parser = args::count(1..=1000))]
        count: usize,
        /// I/Os per trace.
        #[arg(long, default_value_t = 20_000, value_parser = args::count(100..=10_000_000))]
        ios: usize,
        /// Directory for the traces (created; existing traces of the same names are replaced).
        #[arg(long, short)]
        out: PathBuf,
        /// Output format: linnos (text) or binary.
        #[arg(long, value_enum, default_value_t = OutFmt::Linnos)]
        to: OutFmt,
    },
    /// A system-call trace from `strace -f -ttt -T -y [-s N] -o FILE CMD` output, as Parquet
    /// (the format of `iolearn trace record`; `docs/formats.md`).
    ImportStrace {
        /// strace's output file.
        file: PathBuf,
        /// The Parquet trace to write.
        #[arg(long, short)]
        out: PathBuf,
        /// Skip (and count) lines that do not parse instead of failing on the first.
        #[arg(long)]
        skip_bad: bool,
    },
    /// A program's file-system calls, captured with eBPF (root): `iolearn trace record -o
    /// T.parquet -- CMD ARGS` (the command and every process it starts) or `--pid P` (until it
    /// exits or SIGINT). Calls the ring had no room for are counted and reported.
    Record(crate::syscalls::RecordArgs),
    /// A system-call trace's calls: how many, how many failed, bytes moved, latency.
    Calls {
        /// A Parquet system-call trace.
        trace: PathBuf,
    },
}

/// The settings of `iolearn trace generate` (`iolearn_trace::generate::Spec`; ranges checked
/// there, the error naming the option).
#[derive(Args)]
pub struct GenArgs {
    /// I/Os.
    #[arg(long, default_value_t = 20_000)]
    ios: usize,
    /// Mean arrival rate, I/Os per second.
    #[arg(long, default_value_t = 1000.0, allow_negative_numbers = true, value_parser = args::finite)]
    iops: f64,
    /// Share of reads, 0 to 1.
    #[arg(long, default_value_t = 0.4, allow_negative_numbers = true, value_parser = args::finite)]
    read_share: f64,
    /// Bursts at this many times the mean rate with quiet between (1: Poisson arrivals).
    #[arg(long, default_value_t = 4.0, allow_negative_numbers = true, value_parser = args::finite)]
    burst: f64,
    /// Mean burst length, ms.
    #[arg(long, default_value_t = 20.0, allow_negative_numbers = true, value_parser = args::finite)]
    on_ms: f64,
    /// Median read size, KiB.
    #[arg(long, default_value_t = 4.0, allow_negative_numbers = true, value_parser = args::finite)]
    read_kib: f64,
    /// Median write size, KiB.
    #[arg(long, default_value_t = 4.0, allow_negative_numbers = true, value_parser = args::finite)]
    write_kib: f64,
    /// Spread of sizes (sigma of a log-normal law; 0: every I/O its median).
    #[arg(long, default_value_t = 0.7, allow_negative_numbers = true, value_parser = args::finite)]
    size_sigma: f64,
    /// Share of I/Os continuing a sequential stream.
    #[arg(long, default_value_t = 0.2, allow_negative_numbers = true, value_parser = args::finite)]
    seq_share: f64,
    /// Skew of random offsets (Zipf exponent over regions; 0: uniform).
    #[arg(long, default_value_t = 0.8, allow_negative_numbers = true, value_parser = args::finite)]
    zipf: f64,
    /// Address span, GiB.
    #[arg(long, default_value_t = 16.0, allow_negative_numbers = true, value_parser = args::finite)]
    span_gib: f64,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

impl GenArgs {
    fn spec(&self) -> Spec {
        Spec {
            ios: self.ios,
            iops: self.iops,
            read_share: self.read_share,
            burst: self.burst,
            on_ms: self.on_ms,
            read_kib: self.read_kib,
            write_kib: self.write_kib,
            size_sigma: self.size_sigma,
            seq_share: self.seq_share,
            zipf: self.zipf,
            span_gib: self.span_gib,
            seed: self.seed,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub enum By {
    Ios,
    Bytes,
}

/// The formats traces are written in (the readers take more).
#[derive(Clone, Copy, ValueEnum, PartialEq)]
pub enum OutFmt {
    Linnos,
    Binary,
}

#[derive(Clone, Copy, ValueEnum, PartialEq)]
pub enum Fmt {
    Linnos,
    Msr,
    Blkparse,
    Binary,
}

impl Fmt {
    fn to_format(self) -> Format {
        match self {
            Fmt::Linnos => Format::Linnos,
            Fmt::Msr => Format::Msr,
            Fmt::Blkparse => Format::Blkparse,
            Fmt::Binary => Format::Binary,
        }
    }
}

#[derive(Args)]
pub struct Input {
    /// Trace file ("-" for standard input).
    pub(crate) trace: PathBuf,
    /// Its format (default: guessed from the name and contents).
    #[arg(long, value_enum)]
    format: Option<Fmt>,
    /// Skip lines that do not parse (and say how many) instead of stopping at the first.
    #[arg(long)]
    skip_bad: bool,
}

impl Input {
    /// The trace's name in messages (`<stdin>` for `-`).
    pub(crate) fn name(&self) -> String {
        if self.trace.as_os_str() == "-" {
            iolearn_safeio::STDIN_NAME.into()
        } else {
            self.trace.display().to_string()
        }
    }
}

#[derive(Args)]
pub struct Output {
    /// Output file (written atomically; "-" for standard output).
    #[arg(long, short)]
    out: PathBuf,
    /// Output format: linnos (text) or binary.
    #[arg(long, value_enum, default_value_t = OutFmt::Linnos)]
    to: OutFmt,
}

/// A trace whose arrivals go back in time gives wrong durations and rates: an error for the
/// tools that measure or cut by time (`iolearn trace stats`, `cut`, `busiest`).
fn ordered(i: &Input, ios: &[BlockIo]) -> Result<()> {
    if ios.is_empty() {
        bail!("{}: no I/Os", i.name());
    }
    if let Some(k) = ios.windows(2).position(|w| w[1].arrival_ns < w[0].arrival_ns) {
        bail!(
            "{}: I/O {} arrives before the one above it (arrivals must be in time order)",
            i.name(),
            k + 2
        );
    }
    Ok(())
}

pub(crate) fn load(i: &Input) -> Result<Vec<BlockIo>> {
    let t = read_file(
        &i.trace,
        i.format.map(Fmt::to_format),
        ReadOptions { skip_bad: i.skip_bad },
    )?;
    if t.skipped > 0 {
        eprintln!(
            "iolearn: skipped {} bad line(s) of {} (first: {})",
            t.skipped,
            i.name(),
            t.first_error.map(|e| e.to_string()).unwrap_or_default()
        );
    }
    Ok(t.ios)
}

fn encode(to: OutFmt, ios: &[BlockIo]) -> Vec<u8> {
    match to {
        OutFmt::Linnos => linnos::write(ios).into_bytes(),
        OutFmt::Binary => binary::encode(ios),
    }
}

fn save(o: &Output, ios: &[BlockIo]) -> Result<()> {
    let bytes = encode(o.to, ios);
    if o.out.as_os_str() == "-" {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        return out
            .write_all(&bytes)
            .and_then(|()| out.flush())
            .context("<stdout>: cannot write");
    }
    Ok(iolearn_safeio::write(&o.out, &bytes)?)
}

/// Seconds (checked into range by the option's parser) as nanoseconds.
fn seconds_ns(s: f64) -> u64 {
    debug_assert!((0.0..=args::MAX_SECONDS).contains(&s));
    (s * 1e9).round() as u64
}

/// Check an output path before any work, and refuse to overwrite the input with it.
fn check_output(input: &Input, output: &Output) -> Result<()> {
    if output.out.as_os_str() == "-" {
        return Ok(());
    }
    iolearn_safeio::check_target(&output.out)?;
    if iolearn_safeio::same_file(&input.trace, &output.out) {
        bail!("{}: is the input trace; write to another file", output.out.display());
    }
    Ok(())
}

pub fn run(cmd: TraceCommand) -> Result<()> {
    match &cmd {
        TraceCommand::Stats(_) => {}
        TraceCommand::Cut { input, output, .. }
        | TraceCommand::Busiest { input, output, .. }
        | TraceCommand::Rerate { input, output, .. }
        | TraceCommand::Convert { input, output } => check_output(input, output)?,
        TraceCommand::Generate { output, .. } if output.out.as_os_str() != "-" => {
            iolearn_safeio::check_target(&output.out)?;
        }
        TraceCommand::Generate { .. }
        | TraceCommand::Family { .. }
        | TraceCommand::ImportStrace { .. }
        | TraceCommand::Record(_)
        | TraceCommand::Calls { .. } => {}
    }
    match cmd {
        TraceCommand::Stats(i) => {
            let ios = load(&i)?;
            ordered(&i, &ios)?;
            print!("{}", TraceStats::of(&ios).render(&iolearn_safeio::printable(&i.name())));
        }
        TraceCommand::Cut {
            input,
            from,
            seconds,
            skip,
            count,
            output,
        } => {
            let ios = load(&input)?;
            ordered(&input, &ios)?;
            let out = match (from, skip, count) {
                (Some(f), _, _) => {
                    let t0 = ios.first().map_or(0, |io| io.arrival_ns);
                    let len = seconds.map(seconds_ns).unwrap_or(u64::MAX);
                    cut_time(&ios, t0.saturating_add(seconds_ns(f)), len)
                }
                (None, s, c) if s.is_some() || c.is_some() => cut_count(&ios, s.unwrap_or(0), c.unwrap_or(usize::MAX)),
                _ => bail!("cut needs --from [--seconds] or --skip/--count"),
            };
            eprintln!("iolearn: kept {} of {} I/Os", out.len(), ios.len());
            save(&output, &out)?;
        }
        TraceCommand::Busiest {
            input,
            seconds,
            by,
            output,
        } => {
            let ios = load(&input)?;
            if !iolearn_trace::tools::is_ordered(&ios) {
                bail!("{}: arrivals are not in time order", input.trace.display());
            }
            let w = seconds_ns(seconds).max(1);
            let busy = match by {
                By::Ios => Busy::Ios,
                By::Bytes => Busy::Bytes,
            };
            let (start, amount) = busiest(&ios, w, busy).context("empty trace")?;
            let t0 = ios[0].arrival_ns;
            eprintln!(
                "iolearn: busiest {seconds} s starts at {:.3} s: {amount} {}",
                (start - t0) as f64 / 1e9,
                if matches!(by, By::Ios) { "I/Os" } else { "bytes" }
            );
            save(&output, &cut_time(&ios, start, w))?;
        }
        TraceCommand::Rerate { input, factor, output } => {
            let ios = load(&input)?;
            save(&output, &rerate(&ios, factor).map_err(anyhow::Error::msg)?)?;
        }
        TraceCommand::Convert { input, output } => {
            let ios = load(&input)?;
            save(&output, &ios)?;
        }
        TraceCommand::Generate { spec, output } => {
            let ios = generate(&spec.spec()).map_err(|e| anyhow::anyhow!("--{e}"))?;
            save(&output, &ios)?;
        }
        TraceCommand::Family {
            seed,
            count,
            ios,
            out,
            to,
        } => write_family(seed, count, ios, &out, to)?,
        TraceCommand::ImportStrace { file, out, skip_bad } => crate::syscalls::import_strace(&file, &out, skip_bad)?,
        TraceCommand::Calls { trace } => crate::syscalls::calls(&trace)?,
        TraceCommand::Record(a) => crate::syscalls::record(a)?,
    }
    Ok(())
}

/// One file per member (`NAME.trace`, or `.bin`) and `family.json` with every member's
/// settings, in `dir` (created; a link there is refused rather than followed).
fn write_family(seed: u64, count: usize, ios: usize, dir: &std::path::Path, to: OutFmt) -> Result<()> {
    if std::fs::symlink_metadata(dir).is_ok_and(|m| !m.is_dir()) {
        bail!("{}: exists and is not a directory", dir.display());
    }
    // The directory itself is made, not its parents: a mistyped path is an error, not a
    // tree of new directories somewhere else.
    if !dir.is_dir() {
        std::fs::create_dir(dir)
            .with_context(|| format!("{}: cannot create (does its parent exist?)", dir.display()))?;
    }
    let members = family(
        seed,
        count,
        &FamilyRanges {
            ios,
            ..FamilyRanges::default()
        },
    );
    let ext = if to == OutFmt::Binary { "bin" } else { "trace" };
    let mut manifest = Vec::with_capacity(members.len());
    for (name, spec) in &members {
        let trace = generate(spec).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        iolearn_safeio::write(&dir.join(format!("{name}.{ext}")), &encode(to, &trace))?;
        manifest.push(serde_json::json!({
            "name": name, "file": format!("{name}.{ext}"), "ios": spec.ios, "iops": spec.iops,
            "read_share": spec.read_share, "burst": spec.burst, "on_ms": spec.on_ms,
            "read_kib": spec.read_kib, "write_kib": spec.write_kib, "size_sigma": spec.size_sigma,
            "seq_share": spec.seq_share, "zipf": spec.zipf, "span_gib": spec.span_gib, "seed": spec.seed,
        }));
    }
    let json = serde_json::json!({ "family_seed": seed, "members": manifest });
    iolearn_safeio::write(
        &dir.join("family.json"),
        serde_json::to_string_pretty(&json)?.as_bytes(),
    )?;
    eprintln!("iolearn: {count} traces of {ios} I/Os in {}", dir.display());
    Ok(())
}
