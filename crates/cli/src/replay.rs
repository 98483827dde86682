//! `iolearn replay block`: a trace on real replicas through io_uring, a policy before each read.

use crate::args;
use crate::trace::{load, Input};
use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use iolearn_replay::{replay, NoiseConfig, Options, Record};
use iolearn_safeio::same_file;
use std::path::PathBuf;

/// Replays on real devices.
#[derive(Subcommand)]
pub enum ReplayCommand {
    /// Replay a block trace on replica files or block devices (O_DIRECT, io_uring); the
    /// admission policy is asked before each read and a refused read fails over. Writes are
    /// skipped unless --allow-writes (they overwrite the replicas' data).
    Block(Block),
}

#[derive(Args)]
pub struct Block {
    #[command(flatten)]
    input: Input,
    /// Replicas, comma separated: files or block devices (e.g. /dev/loop3,/dev/loop4,/dev/loop5);
    /// 1 to 8.
    #[arg(long, value_delimiter = ',', required = true)]
    replicas: Vec<PathBuf>,
    /// Policy: ADMISSION[+CLIENT][+rank][+cache], e.g. base, base+hedge=500, model=linnos.iolm,
    /// model=tree.iolm@proba=0.3+hedge=300/0.05 (see docs/tail.md).
    #[arg(long, default_value = "base")]
    policy: String,
    /// Arrival rate factor (2: twice as fast; 1e-6 to 1e6).
    #[arg(long, allow_negative_numbers = true, default_value_t = 1.0, value_parser = args::factor)]
    rate: f64,
    /// Replay only the first N I/Os of the trace.
    #[arg(long, allow_negative_numbers = true)]
    limit: Option<usize>,
    /// Replay writes too (they overwrite data on the replicas).
    #[arg(long)]
    allow_writes: bool,
    /// Delay before a refused read goes to the next replica (a network hop), us (0 to 3.6e9).
    #[arg(long, allow_negative_numbers = true, default_value_t = 0.0, value_parser = args::microseconds)]
    failover_us: f64,
    /// I/Os in flight at most (1 to 4096).
    #[arg(long, allow_negative_numbers = true, default_value_t = 128, value_parser = args::count(1..=4096))]
    depth: usize,
    /// Noise threads reading replica 0 during busy periods (0: none; at most 64).
    #[arg(long, allow_negative_numbers = true, default_value_t = 0, value_parser = args::count(0..=64))]
    noise_threads: usize,
    /// Share of time the noise is on (strictly between 0 and 1).
    #[arg(long, allow_negative_numbers = true, default_value_t = 0.25, value_parser = args::share)]
    noise_busy: f64,
    /// Per-I/O records (CSV), written atomically.
    #[arg(long, short)]
    out: Option<PathBuf>,
    /// Buffered I/O through the page cache instead of O_DIRECT: policies see which reads are
    /// cached (mincore), and `+cache` (MittCache) serves those where they arrive.
    #[arg(long)]
    buffered: bool,
    /// Training rows (CSV): each read's latency and what the block layer knew when it arrived
    /// at its first replica (LinnOS's 31 digits, ML-MittOS's 9 values, iolearn-tail-v1's 13).
    /// Rows are only meaningful with a policy that serves reads where they arrive (base).
    #[arg(long)]
    samples: Option<PathBuf>,
    /// Seed.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    seed: u64,
}

/// One row of `--out`: a replayed I/O (the columns of `iolearn_replay::Record`).
#[derive(serde::Serialize)]
struct RecordRow {
    arrival_ns: u64,
    issued_ns: u64,
    primary: u32,
    served_by: u32,
    write: u8,
    offset: u64,
    size: u32,
    latency_ns: u64,
    revoked: u32,
    duplicates: u32,
    errno: i32,
}

impl From<&Record> for RecordRow {
    fn from(r: &Record) -> Self {
        RecordRow {
            arrival_ns: r.arrival_ns,
            issued_ns: r.issued_ns,
            primary: r.primary,
            served_by: r.served_by,
            write: r.write as u8,
            offset: r.offset,
            size: r.size,
            latency_ns: r.latency_ns,
            revoked: r.revoked,
            duplicates: r.duplicates,
            errno: r.errno,
        }
    }
}

pub fn run(cmd: ReplayCommand) -> Result<()> {
    let ReplayCommand::Block(b) = cmd;
    if b.replicas.len() > iolearn_replay::MAX_REPLICAS {
        bail!(
            "--replicas: at most {} replicas, got {}",
            iolearn_replay::MAX_REPLICAS,
            b.replicas.len()
        );
    }
    for (i, r) in b.replicas.iter().enumerate() {
        if b.replicas[..i].iter().any(|q| same_file(q, r)) {
            bail!("--replicas: {} is given twice", r.display());
        }
    }
    // Outputs are checked before the replay, which may run for minutes, and may be neither a
    // replica, the trace, nor each other.
    for out in [&b.out, &b.samples].into_iter().flatten() {
        if b.replicas.iter().any(|r| same_file(r, out)) {
            bail!("{}: is one of the replicas; write the records elsewhere", out.display());
        }
        if same_file(&b.input.trace, out) {
            bail!("{}: is the input trace; write the records elsewhere", out.display());
        }
    }
    if let (Some(o), Some(s)) = (&b.out, &b.samples) {
        if o == s || same_file(o, s) {
            bail!("--out and --samples name the same file {}", o.display());
        }
    }
    for out in [&b.out, &b.samples].into_iter().flatten() {
        iolearn_safeio::check_target(out)?;
    }
    let mut ios = load(&b.input)?;
    if let Some(n) = b.limit {
        ios.truncate(n);
    }
    if ios.is_empty() {
        bail!("{}: no I/Os to replay", b.input.name());
    }
    let t0 = ios.iter().map(|i| i.arrival_ns).min().unwrap_or(0);
    // The replay runs in real time: refuse one that would outlast a day.
    let span_s = (ios.iter().map(|i| i.arrival_ns).max().unwrap_or(0) - t0) as f64 / 1e9 / b.rate;
    if span_s > 86_400.0 {
        bail!(
            "--rate {}: the replay would take {span_s:.0} s of real time (at most a day; use --limit or a higher rate)",
            b.rate
        );
    }
    let tuples: Vec<(u64, u64, u32, bool)> = ios
        .iter()
        .map(|i| (i.arrival_ns - t0, i.offset, i.size, i.write))
        .collect();
    let opts = Options {
        replicas: b.replicas.clone(),
        policy: b.policy.clone(),
        rate: b.rate,
        allow_writes: b.allow_writes,
        failover_us: b.failover_us,
        depth: b.depth,
        noise: (b.noise_threads > 0).then(|| NoiseConfig {
            threads: b.noise_threads,
            busy_fraction: b.noise_busy,
            seed: b.seed,
            ..NoiseConfig::default()
        }),
        seed: b.seed,
        samples: b.samples.is_some(),
        buffered: b.buffered,
    };
    let (records, report, samples) = replay(&tuples, &opts)?;
    if let Some(path) = &b.samples {
        iolearn_safeio::write_with(path, |w| {
            let mut csv = csv::Writer::from_writer(w);
            let mut head: Vec<String> = ["arrival_ns", "replica", "served_by", "latency_ns"]
                .map(String::from)
                .to_vec();
            for (prefix, n) in [("linnos", 31), ("mittos", 9), ("tail", 13)] {
                head.extend((0..n).map(|i| format!("{prefix}{i}")));
            }
            csv.write_record(&head)?;
            for s in &samples {
                let r = &records[s.record];
                let mut row = vec![
                    r.arrival_ns.to_string(),
                    r.primary.to_string(),
                    r.served_by.to_string(),
                    r.latency_ns.to_string(),
                ];
                row.extend(s.features.iter().map(|v| v.to_string()));
                csv.write_record(&row)?;
            }
            csv.flush()
        })?;
    }
    if let Some(out) = &b.out {
        iolearn_safeio::write_with(out, |w| {
            let mut csv = csv::Writer::from_writer(w);
            for r in &records {
                csv.serialize(RecordRow::from(r))?;
            }
            csv.flush()
        })?;
    }
    let mut lat: Vec<f64> = records
        .iter()
        .filter(|r| !r.write && r.errno == 0)
        .map(|r| r.latency_ns as f64 / 1e3)
        .collect();
    lat.sort_by(f64::total_cmp);
    let reads = lat.len().max(1) as f64;
    let revoked: u32 = records.iter().map(|r| r.revoked).sum();
    let dups: u32 = records.iter().map(|r| r.duplicates).sum();
    println!(
        "{}: {} I/Os on {} replicas with {} in {:.1} s ({} writes skipped, {} failed)",
        b.input.name(),
        report.ios,
        b.replicas.len(),
        b.policy,
        report.wall_s,
        report.writes_skipped,
        report.errors
    );
    println!(
        "reads: {} | mean {:.0} us | p50 {:.0} | p90 {:.0} | p99 {:.0} | p99.9 {:.0} | revoked {:.1}% | extra I/O {:.1}% | decision p50 {:.0} ns ({} decisions)",
        lat.len(),
        lat.iter().sum::<f64>() / reads,
        iolearn_tail::metrics::percentile(&lat, 50.0),
        iolearn_tail::metrics::percentile(&lat, 90.0),
        iolearn_tail::metrics::percentile(&lat, 99.0),
        iolearn_tail::metrics::percentile(&lat, 99.9),
        100.0 * revoked as f64 / reads,
        100.0 * dups as f64 / reads,
        report.decision_ns_p50,
        report.decisions
    );
    if let Some(out) = &b.out {
        println!("records: {}", out.display());
    }
    if report.errors > 0 {
        bail!("{} I/Os failed (see the errno column)", report.errors);
    }
    Ok(())
}
