//! `iolearn sim ssd`: a block trace replayed on replicated simulated SSDs
//! (`iolearn_tail::replay_file`), streamed: the summary of its reads, and with `--out` every
//! I/O with the device state it met, as Parquet row groups or CSV written as they come.
//!
//! In Rust, not through the Python module the other simulations use: starting Python and
//! numpy took 0.2 s, a third of a million-I/O replay (docs/benchmarks.md, "Streamed replay").

use crate::args;
use anyhow::{anyhow, Result};
use clap::{Args, Subcommand};
use iolearn_flash::replay::IoRecord;
use iolearn_tail::replay_file::{FileReplay, Options, MAX_REPEAT};
use parquet::basic::Compression;
use parquet::data_type::{BoolType, Int32Type, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Simulations.
#[derive(Subcommand)]
pub enum SimCommand {
    /// Replay a block trace on replicated simulated SSDs: the reads' latencies, and with
    /// --out every I/O with the device state it met (`iolearn sim ssd --trace T --preset
    /// enterprise --replicas 3 --out lat.parquet`).
    Ssd(SsdArgs),
}

/// Options of `iolearn sim ssd`.
#[derive(Args)]
pub struct SsdArgs {
    /// The block trace: LinnOS/Heimdall text, MSR-Cambridge CSV, blkparse or iolearn binary
    /// (`-`: standard input).
    #[arg(long)]
    trace: PathBuf,
    /// The trace's format (default: guessed from its content).
    #[arg(long, value_parser = ["linnos", "msr", "blkparse", "binary"])]
    format: Option<String>,
    /// The drive: consumer, enterprise, or an SSD configuration FILE.toml.
    #[arg(long, default_value = "enterprise")]
    preset: String,
    /// The GC design.
    #[arg(long, default_value = "base",
          value_parser = ["base", "plane-blocking", "tolerant", "preemptive", "no-gc"])]
    mode: String,
    /// Replicas: reads go to replica i mod replicas, writes to all.
    #[arg(long, allow_negative_numbers = true, default_value_t = 3, value_parser = args::count(1..=8))]
    replicas: usize,
    /// Network hop / failover cost, us.
    #[arg(long, allow_negative_numbers = true, default_value_t = 15.0, value_parser = args::microseconds)]
    hop_us: f64,
    /// Noise on the replicas.
    #[arg(long, default_value = "quiet", value_parser = ["quiet", "ec2", "tailatstore", "failslow"])]
    noise: String,
    /// Random overwrites before the replay, times the capacity (0 to 10; 1: GC from the start).
    #[arg(long, allow_negative_numbers = true, default_value_t = 1.0, value_parser = args::overwrites)]
    precondition: f64,
    /// Seed (preconditioning, noise, NAND variability).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Skip unreadable trace lines (counted) instead of stopping at the first.
    #[arg(long)]
    skip_bad: bool,
    /// Play the trace this many times back to back, each pass one mean gap after the last.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1, value_parser = args::count(1..=MAX_REPEAT as usize))]
    repeat: usize,
    /// Every I/O with the device state it met: FILE.parquet (a row group per 262,144 I/Os) or
    /// FILE.csv, written as it comes; the file appears only when the replay is done.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// The per-I/O columns, in order.
pub const COLUMNS: [&str; 11] = [
    "arrival_ns",
    "offset",
    "size",
    "write",
    "replica",
    "latency_ns",
    "pending",
    "plane_wait_ns",
    "channel_wait_ns",
    "gc_active",
    "buffered_pages",
];

/// I/Os per Parquet row group (and per chunk replayed between writes).
const CHUNK_ROWS: usize = 1 << 18;

pub fn run(cmd: SimCommand) -> Result<()> {
    let SimCommand::Ssd(a) = cmd;
    let out = a.out.as_deref();
    if let Some(out) = out {
        // Before the replay, which may run for minutes.
        iolearn_safeio::check_target(out)?;
        if iolearn_safeio::same_file(&a.trace, out) {
            return Err(anyhow!("{}: is the input trace; write to another file", out.display()));
        }
        if !matches!(out.extension().and_then(|e| e.to_str()), Some("parquet" | "csv")) {
            return Err(anyhow!("--out {}: name a .parquet or .csv file", out.display()));
        }
    }
    let o = Options {
        trace: a.trace.clone(),
        format: a.format.as_deref().and_then(iolearn_trace::Format::parse),
        skip_bad: a.skip_bad,
        preset: a.preset,
        mode: a.mode,
        replicas: a.replicas,
        hop_us: a.hop_us,
        noise: a.noise,
        precondition: a.precondition,
        seed: a.seed,
        repeat: a.repeat as u64,
    };
    let mut replay = FileReplay::open(&o).map_err(|e| anyhow!(e))?;
    let rows = match out {
        None => {
            replay.run().map_err(|e| anyhow!(e))?;
            replay.summary().ios()
        }
        Some(out) => write_records(&mut replay, out)?,
    };
    if replay.skipped() > 0 {
        eprintln!("skipped {} bad line(s)", replay.skipped());
    }
    println!("{}", summary_line(&replay));
    match out {
        Some(out) => println!("replayed {rows} I/Os, wrote them to {}", out.display()),
        None => println!("replayed {rows} I/Os"),
    }
    Ok(())
}

/// "N reads: mean .. us, p50 .., ..." and the share that met a plane under GC (with records).
fn summary_line(r: &FileReplay) -> String {
    let s = r.summary();
    if s.reads() == 0 {
        return "no reads".into();
    }
    let us = |q: f64| s.quantile_ns(q) as f64 / 1e3;
    let mut line = format!(
        "{} reads: mean {:.0} us, p50 {:.0}, p90 {:.0}, p95 {:.0}, p99 {:.0}, p99.9 {:.0} us",
        s.reads(),
        s.mean_ns() / 1e3,
        us(0.5),
        us(0.9),
        us(0.95),
        us(0.99),
        us(0.999)
    );
    if let Some(g) = s.gc_share() {
        line += &format!("; {:.2}% arrived at a plane under GC", 100.0 * g);
    }
    line
}

/// Replay everything into `out` (Parquet or CSV by its extension), atomically; the rows.
fn write_records(replay: &mut FileReplay, out: &Path) -> Result<u64> {
    let parquet = out.extension().is_some_and(|e| e == "parquet");
    let mut rows = 0u64;
    let mut failed: Option<String> = None;
    iolearn_safeio::write_with(out, |w| {
        let written = if parquet {
            write_parquet(replay, w)
        } else {
            write_csv(replay, w)
        };
        // A replay error is not an I/O error: keep it whole and discard the file.
        written.map(|n| rows = n).map_err(|e| {
            failed = Some(e);
            std::io::Error::other("replay failed")
        })
    })
    .map_err(|e| match failed.take() {
        Some(f) => anyhow!(f),
        None => anyhow!(e),
    })?;
    Ok(rows)
}

/// Replay everything, handing each chunk of records to `sink` on a second thread, so that
/// encoding and compressing one chunk overlaps replaying the next (the two took about the
/// same time, 0.14 s a million each); the rows.
fn pipelined(
    replay: &mut FileReplay,
    mut sink: impl FnMut(&[IoRecord]) -> Result<(), String> + Send,
) -> Result<u64, String> {
    std::thread::scope(|s| {
        // One chunk waiting while one is written: memory stays at a few chunks. Written ones
        // come back to be filled again (fresh 16 MB buffers cost their page faults each time).
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<IoRecord>>(1);
        let (back, spare) = std::sync::mpsc::sync_channel::<Vec<IoRecord>>(2);
        let writer = s.spawn(move || {
            rx.iter().try_for_each(|chunk| {
                sink(&chunk)?;
                let _ = back.try_send(chunk);
                Ok(())
            })
        });
        let (mut rows, mut replayed) = (0u64, Ok(()));
        loop {
            let mut chunk = spare.try_recv().unwrap_or_else(|_| Vec::with_capacity(CHUNK_ROWS));
            match replay.next_chunk(CHUNK_ROWS, &mut chunk) {
                Err(e) => {
                    replayed = Err(e);
                    break;
                }
                Ok(more) => {
                    rows += chunk.len() as u64;
                    // A send fails only when the writer stopped on an error (joined below).
                    if (!chunk.is_empty() && tx.send(chunk).is_err()) || !more {
                        break;
                    }
                }
            }
        }
        drop(tx);
        let written = writer.join().map_err(|_| "the record writer failed".to_string())?;
        replayed.and(written).map(|()| rows)
    })
}

/// The records as CSV; the rows.
fn write_csv(replay: &mut FileReplay, w: &mut (dyn Write + Send)) -> Result<u64, String> {
    let io = |e: std::io::Error| e.to_string();
    writeln!(w, "{}", COLUMNS.join(",")).map_err(io)?;
    pipelined(replay, |chunk| {
        for r in chunk {
            writeln!(
                w,
                "{},{},{},{},{},{},{},{},{},{},{}",
                r.arrival_ns,
                r.offset,
                r.size,
                u8::from(r.write),
                r.replica,
                r.latency_ns,
                r.pending,
                r.plane_wait_ns,
                r.channel_wait_ns,
                u8::from(r.gc_active),
                r.buffered_pages
            )
            .map_err(io)?;
        }
        Ok(())
    })
}

/// The Parquet schema: unsigned integers as their logical types (readers see uint64/uint32,
/// as the Python writer's files had), bools as BOOLEAN.
const SCHEMA: &str = "message io {
    REQUIRED INT64 arrival_ns (INTEGER(64, false));
    REQUIRED INT64 offset (INTEGER(64, false));
    REQUIRED INT32 size (INTEGER(32, false));
    REQUIRED BOOLEAN write;
    REQUIRED INT32 replica (INTEGER(32, false));
    REQUIRED INT64 latency_ns (INTEGER(64, false));
    REQUIRED INT32 pending (INTEGER(32, false));
    REQUIRED INT64 plane_wait_ns (INTEGER(64, false));
    REQUIRED INT64 channel_wait_ns (INTEGER(64, false));
    REQUIRED BOOLEAN gc_active;
    REQUIRED INT32 buffered_pages (INTEGER(32, false));
}";

/// The records as Parquet, a row group per chunk; the rows.
fn write_parquet(replay: &mut FileReplay, w: &mut (dyn Write + Send)) -> Result<u64, String> {
    let pq = |e: parquet::errors::ParquetError| e.to_string();
    let schema = Arc::new(parquet::schema::parser::parse_message_type(SCHEMA).map_err(pq)?);
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            // Times and offsets are nearly all distinct: a dictionary would only be hashed
            // and dropped (without it a million records are written in 0.30 s, not 0.35).
            .set_dictionary_enabled(false)
            .set_created_by(format!("iolearn {}", env!("CARGO_PKG_VERSION")))
            .build(),
    );
    let mut file = SerializedFileWriter::new(w, schema, props).map_err(pq)?;
    // A row group per chunk; a file with no I/Os still has its columns (no row group).
    let rows = pipelined(replay, |chunk| {
        let mut group = file.next_row_group().map_err(pq)?;
        let mut k = 0;
        while let Some(mut col) = group.next_column().map_err(pq)? {
            write_column(&mut col, k, chunk).map_err(pq)?;
            col.close().map_err(pq)?;
            k += 1;
        }
        group.close().map_err(pq).map(|_| ())
    })?;
    file.close().map_err(pq).map(|_| rows)
}

/// Column `k` of [`COLUMNS`] for the records of `chunk` (unsigned values stored in their
/// signed physical type bit for bit, as Parquet's unsigned logical types are).
fn write_column(
    col: &mut parquet::file::writer::SerializedColumnWriter<'_>,
    k: usize,
    chunk: &[IoRecord],
) -> parquet::errors::Result<()> {
    let i64s = |f: fn(&IoRecord) -> u64| chunk.iter().map(|r| f(r) as i64).collect::<Vec<_>>();
    let i32s = |f: fn(&IoRecord) -> u32| chunk.iter().map(|r| f(r) as i32).collect::<Vec<_>>();
    let bools = |f: fn(&IoRecord) -> bool| chunk.iter().map(f).collect::<Vec<_>>();
    match k {
        0 => col
            .typed::<Int64Type>()
            .write_batch(&i64s(|r| r.arrival_ns), None, None),
        1 => col.typed::<Int64Type>().write_batch(&i64s(|r| r.offset), None, None),
        2 => col.typed::<Int32Type>().write_batch(&i32s(|r| r.size), None, None),
        3 => col.typed::<BoolType>().write_batch(&bools(|r| r.write), None, None),
        4 => col.typed::<Int32Type>().write_batch(&i32s(|r| r.replica), None, None),
        5 => col
            .typed::<Int64Type>()
            .write_batch(&i64s(|r| r.latency_ns), None, None),
        6 => col.typed::<Int32Type>().write_batch(&i32s(|r| r.pending), None, None),
        7 => col
            .typed::<Int64Type>()
            .write_batch(&i64s(|r| r.plane_wait_ns), None, None),
        8 => col
            .typed::<Int64Type>()
            .write_batch(&i64s(|r| r.channel_wait_ns), None, None),
        9 => col.typed::<BoolType>().write_batch(&bools(|r| r.gc_active), None, None),
        10 => col
            .typed::<Int32Type>()
            .write_batch(&i32s(|r| r.buffered_pages), None, None),
        _ => unreachable!("the schema has {} columns", COLUMNS.len()),
    }
    .map(|_| ())
}
