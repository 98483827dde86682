//! Synthetic block traces, to develop latency policies against more than the traces one has.
//!
//! [`Spec`] names what block traces differ in: load (I/Os per second), the share of reads, the
//! sizes of reads and of writes, where they land (sequential streams, random offsets skewed to
//! hot regions) and how arrivals bunch (an on/off source: bursts at `burst` times the mean
//! rate, quiet between). [`generate`] turns one into I/Os, a seed fixing every draw.
//! [`family`] draws many specs from ranges wide enough to cover light and saturating loads,
//! read- and write-heavy mixes, small and large I/Os; two families with different seeds share
//! no member, which is how a policy is tuned on one (training) and reported on another (test).
//!
//! The distributions are a few lines each by inverse transform on the crate's seeded
//! generator (`iolearn_ml::Rng`, the one every simulation here uses), so a trace depends
//! on its seed and nothing else.

use crate::BlockIo;
use iolearn_ml::Rng;

/// The largest I/O the generator makes (sizes are clamped to it): 4 MiB, the largest request
/// a block layer commonly sends.
pub const MAX_IO_BYTES: u64 = 4 << 20;

/// Offsets and sizes are multiples of a sector.
const SECTOR: u64 = 512;

/// Random offsets are drawn over at most this many equal regions, ranked by popularity (a
/// Zipf law over the ranks; the ranks are scattered over the span).
const REGIONS: usize = 4096;

/// Sequential streams advancing at once (a scan moves one of them; each restarts elsewhere
/// after about `STREAM_RESTART` of its I/Os).
const STREAMS: usize = 4;
const STREAM_RESTART: usize = 256;

/// One synthetic trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// I/Os in the trace.
    pub ios: usize,
    /// Mean arrival rate, I/Os per second.
    pub iops: f64,
    /// Share of reads (the rest are writes), 0 to 1.
    pub read_share: f64,
    /// Burstiness: during a burst I/Os arrive at `burst` times the mean rate, and nothing
    /// arrives between bursts (1: Poisson arrivals, no bursts).
    pub burst: f64,
    /// Mean length of a burst, ms (bursts and the gaps between them have exponential lengths).
    pub on_ms: f64,
    /// Median read size, KiB.
    pub read_kib: f64,
    /// Median write size, KiB.
    pub write_kib: f64,
    /// Spread of sizes: the sigma of their log-normal law (0: every read is `read_kib`).
    pub size_sigma: f64,
    /// Share of I/Os that continue a sequential stream (the others land at random offsets).
    pub seq_share: f64,
    /// Skew of the random offsets: the Zipf exponent over regions of the span (0: uniform).
    pub zipf: f64,
    /// The address span the I/Os land in, GiB.
    pub span_gib: f64,
    /// Seed of every draw.
    pub seed: u64,
}

impl Default for Spec {
    /// A mid-load mixed trace like the reference MSR cuts at ten times their rate.
    fn default() -> Self {
        Spec {
            ios: 20_000,
            iops: 1000.0,
            read_share: 0.4,
            burst: 4.0,
            on_ms: 20.0,
            read_kib: 4.0,
            write_kib: 4.0,
            size_sigma: 0.7,
            seq_share: 0.2,
            zipf: 0.8,
            span_gib: 16.0,
            seed: 1,
        }
    }
}

/// The ranges [`Spec::check`] enforces, by field (named as the CLI's options).
pub const RANGES: [(&str, f64, f64); 11] = [
    ("ios", 1.0, 100e6),
    ("iops", 1e-3, 1e7),
    ("read-share", 0.0, 1.0),
    ("burst", 1.0, 1000.0),
    ("on-ms", 0.01, 1e6),
    ("read-kib", 0.5, (MAX_IO_BYTES >> 10) as f64),
    ("write-kib", 0.5, (MAX_IO_BYTES >> 10) as f64),
    ("size-sigma", 0.0, 4.0),
    ("seq-share", 0.0, 1.0),
    ("zipf", 0.0, 4.0),
    ("span-gib", 0.01, 1e6),
];

impl Spec {
    /// Every field in its range (`RANGES`), and a duration that nanoseconds hold; the error
    /// names the field.
    pub fn check(&self) -> Result<(), String> {
        let values = [
            self.ios as f64,
            self.iops,
            self.read_share,
            self.burst,
            self.on_ms,
            self.read_kib,
            self.write_kib,
            self.size_sigma,
            self.seq_share,
            self.zipf,
            self.span_gib,
        ];
        for (&(name, lo, hi), v) in RANGES.iter().zip(values) {
            if !(lo..=hi).contains(&v) {
                // A huge or tiny value in exponent form, not 300 digits.
                let got = if v != 0.0 && !(1e-3..1e7).contains(&v.abs()) {
                    format!("{v:e}")
                } else {
                    format!("{v}")
                };
                return Err(format!("{name} must be from {lo} to {hi}, got {got}"));
            }
        }
        // The whole trace within about 2^62 ns (146 years): times cannot overflow.
        let seconds = self.ios as f64 / self.iops;
        if seconds > 1.4e8 {
            return Err(format!(
                "ios / iops: {} I/Os at {} per second span more than 4 years",
                self.ios, self.iops
            ));
        }
        // The generator steps through every burst and gap: bound their number (bursts far
        // shorter than the gaps between I/Os would take a step per burst for nothing).
        let cycles = if self.burst > 1.0 {
            seconds * 1e3 / (self.on_ms * self.burst)
        } else {
            0.0
        };
        if cycles > 1e8 {
            return Err(format!(
                "on-ms: {} ms bursts at {} I/Os per second make {cycles:.1e} bursts (at most 1e8: longer bursts, or burst 1)",
                self.on_ms, self.iops
            ));
        }
        Ok(())
    }

    /// The span in bytes (a whole number of sectors, at least one largest I/O).
    fn span_bytes(&self) -> u64 {
        let b = (self.span_gib * (1u64 << 30) as f64) as u64 / SECTOR * SECTOR;
        b.max(MAX_IO_BYTES)
    }
}

/// Exponential with mean `mean` (inverse transform).
fn exponential(rng: &mut Rng, mean: f64) -> f64 {
    -mean * (1.0f64 - rng.next_f64()).ln()
}

/// The I/Os of `spec`, in arrival order, on device 0, times from 0 (the first arrives after
/// one draw of the arrival process). Errors when a field is out of range ([`Spec::check`]).
pub fn generate(spec: &Spec) -> Result<Vec<BlockIo>, String> {
    spec.check()?;
    let mut rng = Rng::new(spec.seed);
    let span = spec.span_bytes();
    let region = (span / REGIONS as u64).max(SECTOR) / SECTOR * SECTOR;
    let regions = (span / region).clamp(1, REGIONS as u64) as usize;
    // Zipf over region ranks: the cumulative weights, searched per draw.
    let mut cdf: Vec<f64> = (1..=regions).map(|k| (k as f64).powf(-spec.zipf)).collect();
    for k in 1..cdf.len() {
        cdf[k] += cdf[k - 1];
    }
    let total = cdf[cdf.len() - 1];
    // Rank -> region: hot regions scattered over the span, not packed at its start.
    let mut place: Vec<u64> = (0..regions as u64).collect();
    rng.shuffle(&mut place);
    let mut streams: Vec<u64> = (0..STREAMS).map(|_| rng.below(regions) as u64 * region).collect();

    // Arrivals: an on/off source. In a burst I/Os come at `burst` x the mean rate; a gap
    // follows each burst, its mean `on_ms * (burst - 1)` so the mean rate is `iops`.
    let on_rate = spec.iops * spec.burst / 1e9; // per ns
    let on_ns = spec.on_ms * 1e6;
    let off_ns = on_ns * (spec.burst - 1.0);
    let mut t = 0.0f64;
    let mut burst_end = if spec.burst > 1.0 {
        exponential(&mut rng, on_ns)
    } else {
        f64::INFINITY
    };

    let mut out = Vec::with_capacity(spec.ios);
    for _ in 0..spec.ios {
        t += exponential(&mut rng, 1.0 / on_rate);
        while t > burst_end {
            // The draw ran past the burst: memoryless, so the rest of it starts the next one.
            let gap = exponential(&mut rng, off_ns);
            t += gap;
            burst_end += gap + exponential(&mut rng, on_ns);
        }
        let write = rng.next_f64() >= spec.read_share;
        let median = if write { spec.write_kib } else { spec.read_kib } * 1024.0;
        let bytes = median * (spec.size_sigma * rng.normal()).exp();
        // Clamped before the cast: a far tail draw would overflow the multiplication.
        let sectors = (bytes / SECTOR as f64)
            .round()
            .clamp(1.0, (MAX_IO_BYTES.min(span) / SECTOR) as f64);
        let size = sectors as u64 * SECTOR;
        let offset = if rng.next_f64() < spec.seq_share {
            let s = rng.below(STREAMS);
            if rng.below(STREAM_RESTART) == 0 {
                streams[s] = rng.below(regions) as u64 * region;
            }
            let at = if streams[s] + size > span { 0 } else { streams[s] };
            streams[s] = at + size;
            at
        } else {
            let u = rng.next_f64() * total;
            let rank = cdf.partition_point(|&c| c < u).min(regions - 1);
            let within = rng.below((region / SECTOR) as usize) as u64 * SECTOR;
            // 4 KiB aligned as file systems place blocks (sector aligned where the span's end
            // cuts in), and inside the span.
            ((place[rank] * region + within) & !4095).min(span - size) / SECTOR * SECTOR
        };
        out.push(BlockIo::new(t as u64, 0, offset, size as u32, write));
    }
    Ok(out)
}

/// A value drawn uniformly between `lo` and `hi` on a log scale.
fn log_uniform(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
    (lo.ln() + rng.next_f64() * (hi.ln() - lo.ln())).exp()
}

/// The ranges a [`family`] draws from: loads from light to past what the simulated drives
/// serve with noise, mixes from read- to write-heavy, I/Os from a sector to a megabyte.
#[derive(Debug, Clone, PartialEq)]
pub struct FamilyRanges {
    /// I/Os per trace.
    pub ios: usize,
    /// Mean rate, I/Os per second (log-uniform).
    pub iops: (f64, f64),
    /// Share of reads (uniform).
    pub read_share: (f64, f64),
    /// Burstiness (log-uniform).
    pub burst: (f64, f64),
    /// Mean burst, ms (log-uniform).
    pub on_ms: (f64, f64),
    /// Median sizes, KiB (log-uniform, reads and writes drawn apart).
    pub kib: (f64, f64),
    /// Size spread (uniform).
    pub size_sigma: (f64, f64),
    /// Sequential share (uniform).
    pub seq_share: (f64, f64),
    /// Zipf skew (uniform).
    pub zipf: (f64, f64),
    /// Span, GiB (log-uniform).
    pub span_gib: (f64, f64),
}

impl Default for FamilyRanges {
    fn default() -> Self {
        FamilyRanges {
            ios: 20_000,
            iops: (200.0, 50_000.0),
            read_share: (0.1, 0.9),
            burst: (1.0, 30.0),
            on_ms: (1.0, 200.0),
            kib: (1.0, 128.0),
            size_sigma: (0.0, 1.2),
            seq_share: (0.0, 0.7),
            zipf: (0.0, 1.2),
            span_gib: (1.0, 256.0),
        }
    }
}

/// `count` specs drawn from `ranges` with `seed`, named `gen{seed}-{k}` (k from 0). Every
/// member's own seed derives from the family's, so families with different seeds share no
/// trace.
pub fn family(seed: u64, count: usize, ranges: &FamilyRanges) -> Vec<(String, Spec)> {
    let mut rng = Rng::new(seed ^ 0x6661_6d69_6c79); // "family": apart from a trace's own seed
    (0..count)
        .map(|k| {
            let u = |rng: &mut Rng, (lo, hi): (f64, f64)| lo + rng.next_f64() * (hi - lo);
            let spec = Spec {
                ios: ranges.ios,
                iops: log_uniform(&mut rng, ranges.iops.0, ranges.iops.1),
                read_share: u(&mut rng, ranges.read_share),
                burst: log_uniform(&mut rng, ranges.burst.0, ranges.burst.1),
                on_ms: log_uniform(&mut rng, ranges.on_ms.0, ranges.on_ms.1),
                read_kib: log_uniform(&mut rng, ranges.kib.0, ranges.kib.1),
                write_kib: log_uniform(&mut rng, ranges.kib.0, ranges.kib.1),
                size_sigma: u(&mut rng, ranges.size_sigma),
                seq_share: u(&mut rng, ranges.seq_share),
                zipf: u(&mut rng, ranges.zipf),
                span_gib: log_uniform(&mut rng, ranges.span_gib.0, ranges.span_gib.1),
                seed: seed.wrapping_mul(1_000_003).wrapping_add(k as u64),
            };
            (format!("gen{seed}-{k}"), spec)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_rate(ios: &[BlockIo]) -> f64 {
        (ios.len() - 1) as f64 / (ios.last().unwrap().arrival_ns - ios[0].arrival_ns) as f64 * 1e9
    }

    /// Squared coefficient of variation of the I/O counts in windows of `w_ns`.
    fn count_cv2(ios: &[BlockIo], w_ns: u64) -> f64 {
        let n = (ios.last().unwrap().arrival_ns / w_ns + 1) as usize;
        let mut c = vec![0.0f64; n];
        for io in ios {
            c[(io.arrival_ns / w_ns) as usize] += 1.0;
        }
        let m = c.iter().sum::<f64>() / n as f64;
        c.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n as f64 / (m * m)
    }

    #[test]
    fn the_trace_has_the_rate_mix_and_sizes_it_was_asked_for() {
        for (iops, read, burst) in [(500.0, 0.2, 1.0), (20_000.0, 0.8, 10.0)] {
            let spec = Spec {
                ios: 50_000,
                iops,
                read_share: read,
                burst,
                on_ms: 2.0, // many bursts: the measured rate is close to the mean
                read_kib: 8.0,
                write_kib: 64.0,
                size_sigma: 0.0,
                ..Spec::default()
            };
            let ios = generate(&spec).unwrap();
            assert_eq!(ios.len(), 50_000);
            assert!(ios.windows(2).all(|w| w[0].arrival_ns <= w[1].arrival_ns));
            let rate = mean_rate(&ios);
            assert!((rate / iops - 1.0).abs() < 0.15, "{iops}: {rate}");
            let reads = ios.iter().filter(|io| !io.write).count() as f64 / ios.len() as f64;
            assert!((reads - read).abs() < 0.02, "{reads}");
            assert!(ios.iter().all(|io| io.size == if io.write { 65536 } else { 8192 }));
            let span = spec.span_bytes();
            assert!(ios
                .iter()
                .all(|io| io.offset % SECTOR == 0 && io.offset + io.size as u64 <= span));
        }
    }

    #[test]
    fn bursts_bunch_arrivals_and_poisson_does_not() {
        let calm = generate(&Spec {
            burst: 1.0,
            ..Spec::default()
        })
        .unwrap();
        let bursty = generate(&Spec {
            burst: 20.0,
            on_ms: 10.0,
            ..Spec::default()
        })
        .unwrap();
        // Counts in 100 ms windows: Poisson's variance is its mean (cv^2 = 1/100 here); an
        // on/off source at 20x is far above.
        let (c, b) = (count_cv2(&calm, 100_000_000), count_cv2(&bursty, 100_000_000));
        assert!(c < 0.03, "{c}");
        assert!(b > 10.0 * c, "{b} vs {c}");
    }

    #[test]
    fn sequential_share_and_skew_show_in_the_offsets() {
        let seq = |s: f64| {
            let ios = generate(&Spec {
                seq_share: s,
                burst: 1.0,
                ..Spec::default()
            })
            .unwrap();
            let mut ends = std::collections::HashSet::new();
            let mut hits = 0;
            for io in &ios {
                hits += usize::from(ends.contains(&io.offset));
                ends.insert(io.offset + io.size as u64);
            }
            hits as f64 / ios.len() as f64
        };
        let (none, most) = (seq(0.0), seq(0.8));
        assert!(none < 0.02 && most > 0.6, "{none} {most}");
        let top_share = |z: f64| {
            let spec = Spec {
                zipf: z,
                seq_share: 0.0,
                ..Spec::default()
            };
            let region = spec.span_bytes() / REGIONS as u64;
            let mut counts = std::collections::HashMap::new();
            for io in generate(&spec).unwrap() {
                *counts.entry(io.offset / region).or_insert(0usize) += 1;
            }
            let mut v: Vec<usize> = counts.into_values().collect();
            v.sort_unstable_by(|a, b| b.cmp(a));
            v.iter().take(40).sum::<usize>() as f64 / 20_000.0
        };
        // The 40 busiest of 4,096 regions: about 1% of I/Os when uniform, most when skewed.
        let (flat, skewed) = (top_share(0.0), top_share(1.2));
        assert!(flat < 0.03 && skewed > 0.4, "{flat} {skewed}");
    }

    #[test]
    fn a_seed_fixes_the_trace_and_families_with_other_seeds_share_nothing() {
        assert_eq!(generate(&Spec::default()), generate(&Spec::default()));
        assert_ne!(
            generate(&Spec::default()),
            generate(&Spec {
                seed: 2,
                ..Spec::default()
            })
        );
        let r = FamilyRanges::default();
        let (a, b) = (family(1, 16, &r), family(2, 16, &r));
        assert_eq!(a, family(1, 16, &r));
        for (_, s) in &a {
            assert!(s.check().is_ok(), "{s:?}");
            assert!(b.iter().all(|(_, t)| t.seed != s.seed && t.iops != s.iops), "{s:?}");
        }
        // Drawn over the ranges, not bunched: light and heavy loads, read- and write-heavy.
        let lo = a.iter().filter(|(_, s)| s.iops < 2000.0).count();
        let reads = a.iter().filter(|(_, s)| s.read_share > 0.5).count();
        assert!((3..=13).contains(&lo) && (3..=13).contains(&reads), "{lo} {reads}");
    }

    #[test]
    fn out_of_range_fields_are_named() {
        for (spec, field) in [
            (
                Spec {
                    ios: 0,
                    ..Spec::default()
                },
                "ios",
            ),
            (
                Spec {
                    iops: f64::NAN,
                    ..Spec::default()
                },
                "iops",
            ),
            (
                Spec {
                    read_share: 1.5,
                    ..Spec::default()
                },
                "read-share",
            ),
            (
                Spec {
                    burst: 0.5,
                    ..Spec::default()
                },
                "burst",
            ),
            (
                Spec {
                    read_kib: 1e9,
                    ..Spec::default()
                },
                "read-kib",
            ),
            (
                Spec {
                    zipf: -1.0,
                    ..Spec::default()
                },
                "zipf",
            ),
            (
                Spec {
                    span_gib: f64::INFINITY,
                    ..Spec::default()
                },
                "span-gib",
            ),
            (
                Spec {
                    ios: 100_000_000,
                    iops: 1e-3,
                    ..Spec::default()
                },
                "ios / iops",
            ),
            (
                Spec {
                    ios: 100_000,
                    iops: 1e-3,
                    burst: 1.001,
                    on_ms: 0.01,
                    ..Spec::default()
                },
                "on-ms",
            ),
        ] {
            let e = generate(&spec).unwrap_err();
            assert!(e.starts_with(field), "{e}");
        }
    }
}
