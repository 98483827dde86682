//! `iolearn replay block`: a trace on real replicas through io_uring, a policy before each read.

use crate::args;
use crate::trace::{load, Input};
use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use iolearn_replay::mix::{MixOptions, Prio, Strategy, Tenant};
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
    /// MittCFQ's successor on real block devices: a replicated store's gets (small random
    /// reads) behind each device's own I/O scheduler (bfq, mq-deadline), another tenant's reads
    /// at its own I/O priority, and a client strategy (base, hedged, MittOS with the books of
    /// the scheduler fed by the block tracepoints). Root and eBPF needed; read-only.
    Mix(Mix),
    /// Replay a system-call trace (`iolearn trace record` or `trace import-strace`) under a
    /// target directory, a thread per traced thread, ordered by ARTC's rules (or TO, ST, UC),
    /// every return value checked against the trace's.
    Syscalls(crate::syscalls::ReplayArgs),
}

#[derive(Args)]
pub struct Mix {
    /// Block devices, one per replica, comma separated (2 to 8), e.g. /dev/loop3,/dev/loop4.
    #[arg(long, value_delimiter = ',', required = true)]
    replicas: Vec<PathBuf>,
    /// base, hedged:MS (a second copy after MS), mitt:MS (EBUSY when the books predict the
    /// read would take over MS; the last replica takes it), mitt-wait:MS (every replica asked;
    /// all busy: the least busy).
    #[arg(long, default_value = "base", value_parser = parse_strategy)]
    strategy: Strategy,
    /// Gets per second, all replicas together (Poisson arrivals).
    #[arg(long, allow_negative_numbers = true, default_value_t = 200.0, value_parser = args::factor)]
    gets_per_s: f64,
    /// Bytes a get reads, KiB (4 to 256, a multiple of 4).
    #[arg(long, allow_negative_numbers = true, default_value_t = 4, value_parser = args::count(4..=256))]
    get_kib: usize,
    /// Store threads per replica.
    #[arg(long, allow_negative_numbers = true, default_value_t = 8, value_parser = args::count(1..=64))]
    store_threads: usize,
    /// The store's I/O priority: rt0..rt7, be0..be7 or idle.
    #[arg(long, default_value = "be4", value_parser = parse_prio)]
    store_prio: Prio,
    /// Gets read from the first MiB of each device (0: all of it).
    #[arg(long, allow_negative_numbers = true, default_value_t = 0, value_parser = args::count(0..=1 << 40))]
    data_mib: usize,
    /// Every get tries this replica first (MittOS's microbenchmarks); else a random one.
    #[arg(long, allow_negative_numbers = true, value_parser = args::count(0..=7))]
    first: Option<usize>,
    /// Tenant threads per replica it runs on (0: no tenant).
    #[arg(long, allow_negative_numbers = true, default_value_t = 4, value_parser = args::count(0..=64))]
    tenant_threads: usize,
    /// The tenant's read size, KiB.
    #[arg(long, allow_negative_numbers = true, default_value_t = 4, value_parser = args::count(1..=256))]
    tenant_kib: usize,
    /// The tenant's I/O priority.
    #[arg(long, default_value = "be0", value_parser = parse_prio)]
    tenant_prio: Prio,
    /// Replicas the tenant reads, comma separated (default: all).
    #[arg(long, value_delimiter = ',', value_parser = args::count(0..=7))]
    tenant_on: Vec<usize>,
    /// Share of time the tenant is busy (1: always).
    #[arg(long, allow_negative_numbers = true, default_value_t = 1.0, value_parser = args::observed_share)]
    tenant_busy: f64,
    /// Mean busy period of the tenant, ms.
    #[arg(long, allow_negative_numbers = true, default_value_t = 200.0, value_parser = args::factor)]
    tenant_period_ms: f64,
    /// An EBUSY's round trip and the retry's trip to the next replica, us.
    #[arg(long, allow_negative_numbers = true, default_value_t = 300.0, value_parser = args::microseconds)]
    failover_us: f64,
    /// Gets arrive for this long, s.
    #[arg(long, allow_negative_numbers = true, default_value_t = 30.0, value_parser = args::seconds)]
    duration: f64,
    /// Gets of the first seconds are not recorded (the tenant's queues settle).
    #[arg(long, allow_negative_numbers = true, default_value_t = 2.0, value_parser = args::offset_seconds)]
    warmup: f64,
    /// Seed of arrivals, offsets, replica choices and the tenant's phases.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Per-get records (CSV), written atomically.
    #[arg(long, short)]
    out: Option<PathBuf>,
}

fn parse_strategy(s: &str) -> Result<Strategy, String> {
    Strategy::parse(s)
}

fn parse_prio(s: &str) -> Result<Prio, String> {
    iolearn_replay::mix::parse_prio(s)
}

/// One row of `iolearn replay mix --out`.
#[derive(serde::Serialize)]
struct GetRow {
    due_ns: u64,
    latency_ns: u64,
    first: u32,
    served_by: u32,
    ebusy: u32,
    duplicates: u32,
    predicted_ns: u64,
    actual_ns: u64,
    lag_ns: u64,
}

fn run_mix(m: Mix) -> Result<()> {
    for (i, r) in m.replicas.iter().enumerate() {
        if m.replicas[..i].iter().any(|q| same_file(q, r)) {
            bail!("--replicas: {} is given twice", r.display());
        }
    }
    if let Some(out) = &m.out {
        if m.replicas.iter().any(|r| same_file(r, out)) {
            bail!("{}: is one of the replicas; write the records elsewhere", out.display());
        }
        iolearn_safeio::check_target(out)?;
    }
    if !m.get_kib.is_multiple_of(4) {
        bail!("--get-kib: {} (a multiple of 4: reads are O_DIRECT pages)", m.get_kib);
    }
    let n = m.replicas.len();
    // The library checks these too; here the error names the option.
    if !(2..=iolearn_replay::MAX_REPLICAS).contains(&n) {
        bail!("--replicas: {n} devices (2 to {})", iolearn_replay::MAX_REPLICAS);
    }
    if m.failover_us > 1e6 {
        bail!("--failover-us: {} (0 to 1000000)", m.failover_us);
    }
    if m.duration > 86_400.0 {
        bail!("--duration: {} s (at most 86400)", m.duration);
    }
    if m.warmup >= m.duration {
        bail!("--warmup: {} s (less than --duration, {} s)", m.warmup, m.duration);
    }
    if m.gets_per_s * m.duration > 50e6 {
        bail!(
            "--gets-per-s x --duration: {:.0} gets (at most 50 million)",
            m.gets_per_s * m.duration
        );
    }
    if let Some(f) = m.first.filter(|&f| f >= n) {
        bail!("--first: {f} (0 to {}: the replicas' indices)", n - 1);
    }
    for (i, &r) in m.tenant_on.iter().enumerate() {
        if r >= n {
            bail!("--tenant-on: {r} (0 to {}: the replicas' indices)", n - 1);
        }
        if m.tenant_on[..i].contains(&r) {
            bail!("--tenant-on: replica {r} is given twice");
        }
    }
    if !(0.001..=60_000.0).contains(&m.tenant_period_ms) {
        bail!("--tenant-period-ms: {} (0.001 to 60000)", m.tenant_period_ms);
    }
    let tenant = (m.tenant_threads > 0).then(|| {
        let on = if m.tenant_on.is_empty() {
            (0..n).collect()
        } else {
            m.tenant_on.clone()
        };
        (
            Tenant {
                threads: m.tenant_threads,
                kib: m.tenant_kib as u32,
                prio: m.tenant_prio,
                fraction: m.tenant_busy,
                period_ms: m.tenant_period_ms,
            },
            on,
        )
    });
    let opts = MixOptions {
        replicas: m.replicas.clone(),
        strategy: m.strategy,
        gets_per_s: m.gets_per_s,
        get_bytes: (m.get_kib as u64) << 10,
        store_threads: m.store_threads,
        store_prio: m.store_prio,
        data_bytes: (m.data_mib as u64) << 20,
        first: m.first,
        tenant,
        failover_us: m.failover_us,
        duration_s: m.duration,
        warmup_s: m.warmup,
        seed: m.seed,
    };
    let (records, report) = iolearn_replay::mix::run(&opts)?;
    if let Some(out) = &m.out {
        iolearn_safeio::write_with(out, |w| {
            let mut csv = csv::Writer::from_writer(w);
            for r in &records {
                csv.serialize(GetRow {
                    due_ns: r.due_ns,
                    latency_ns: r.latency_ns,
                    first: r.first,
                    served_by: r.served_by,
                    ebusy: r.ebusy,
                    duplicates: r.duplicates,
                    predicted_ns: r.predicted_ns,
                    actual_ns: r.actual_ns,
                    lag_ns: r.lag_ns,
                })?;
            }
            csv.flush()
        })?;
    }
    let mut lat: Vec<f64> = records.iter().map(|r| r.latency_ns as f64 / 1e3).collect();
    lat.sort_by(f64::total_cmp);
    let gets = lat.len().max(1) as f64;
    let pct = |q| iolearn_tail::metrics::percentile(&lat, q);
    println!(
        "{} gets on {} in {:.1} s | mean {:.0} us | p50 {:.0} | p95 {:.0} | p99 {:.0} | EBUSY {:.1}% | extra copies {:.1}%",
        lat.len(),
        report.schedulers.join(", "),
        report.wall_s,
        lat.iter().sum::<f64>() / gets,
        pct(50.0),
        pct(95.0),
        pct(99.0),
        100.0 * records.iter().map(|r| r.ebusy as f64).sum::<f64>() / gets,
        100.0 * records.iter().map(|r| r.duplicates as f64).sum::<f64>() / gets,
    );
    let prof: Vec<String> = report
        .profile
        .iter()
        .map(|(ns, kib)| format!("{:.0} us + {:.2} us/KiB", *ns as f64 / 1e3, kib / 1e3))
        .collect();
    println!(
        "books: {} inserts, {} issues, {} completions, {} merges, {} lost, {} left waiting | prediction p50 {} ns | profiles {}",
        report.events[0],
        report.events[1],
        report.events[2],
        report.events[3],
        report.lost,
        report.stale,
        report.predict_ns_p50,
        prof.join(", ")
    );
    let late = records.iter().filter(|r| r.lag_ns > 1_000_000).count();
    if late > 0 {
        println!(
            "{late} gets were taken up over 1 ms late (every client busy; max {:.1} ms, counted in their latency)",
            records.iter().map(|r| r.lag_ns).max().unwrap_or(0) as f64 / 1e6
        );
    }
    if let Some(out) = &m.out {
        println!("records: {}", out.display());
    }
    Ok(())
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
    let b = match cmd {
        ReplayCommand::Block(b) => b,
        ReplayCommand::Mix(m) => return run_mix(m),
        ReplayCommand::Syscalls(a) => return crate::syscalls::replay(a),
    };
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
