//! `iolearn trace`: block trace tools.

use crate::args;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
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

fn save(o: &Output, ios: &[BlockIo]) -> Result<()> {
    let bytes = match o.to {
        OutFmt::Linnos => linnos::write(ios).into_bytes(),
        OutFmt::Binary => binary::encode(ios),
    };
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
    }
    Ok(())
}
