//! The flash SSD (issue 5): GC makes tails and TinyTailFlash's designs remove them (must-show
//! 2); at low load latency is the analytical service time, and the FTL conserves pages
//! (must-show 3).

use iolearn_flash::ssd::{GcMode, Ssd, SsdConfig};
use iolearn_ml::Rng;

/// Read latencies (ns, sorted) and the drive after `n` one-page random I/Os on `ssd`,
/// preconditioned: Poisson arrivals whose rate and write share `load` gives for the time of
/// the last arrival.
fn replay(mut ssd: Ssd, n: usize, load: impl Fn(u64) -> (f64, f64)) -> (Vec<u64>, Ssd) {
    ssd.precondition(1.0, 7);
    let page = ssd.config().page_bytes;
    let mut rng = Rng::new(42);
    let pages = ssd.logical_pages();
    let (mut t, mut lat) = (0u64, Vec::new());
    for _ in 0..n {
        let (iops, writes) = load(t);
        t += (-(1.0 - rng.next_f64()).ln() / iops * 1e9) as u64;
        let off = (rng.next_u64() % pages) * page;
        let write = rng.next_f64() < writes;
        let done = ssd.submit(t, off, page, write);
        assert!(done > t);
        if !write {
            lat.push(done - t);
        }
    }
    lat.sort_unstable();
    (lat, ssd)
}

/// Read latencies (ns, sorted) of a write-heavy random workload: Poisson arrivals at `iops`,
/// 70% writes, one page each, on a preconditioned drive.
fn run(cfg: &SsdConfig, mode: GcMode, iops: f64, n: usize) -> (Vec<u64>, Ssd) {
    replay(Ssd::new(cfg.clone(), mode), n, |_| (iops, 0.7))
}

fn q(lat: &[u64], p: f64) -> f64 {
    lat[((lat.len() - 1) as f64 * p) as usize] as f64
}

#[test]
fn gc_makes_tails_and_tinytailflash_removes_them() {
    let cfg = SsdConfig::enterprise();
    let (nogc, _) = run(&cfg, GcMode::NoGc, 8000.0, 60_000);
    let (base, base_ssd) = run(&cfg, GcMode::Base, 8000.0, 60_000);
    let (tol, tol_ssd) = run(&cfg, GcMode::Tolerant, 8000.0, 60_000);
    // Base: p99.9 at least 10x no-GC's (TinyTailFlash: 5.6-138x), median unchanged.
    assert!(
        q(&base, 0.999) >= 10.0 * q(&nogc, 0.999),
        "{} vs {}",
        q(&base, 0.999),
        q(&nogc, 0.999)
    );
    assert!(q(&base, 0.5) <= 1.2 * q(&nogc, 0.5));
    let s = base_ssd.stats();
    let blocked = s.gc_blocked_reads as f64 / s.reads as f64;
    assert!(blocked > 0.01, "base: GC blocks {:.2}% of reads", 100.0 * blocked);
    // TinyTailFlash: GC-blocked reads 0.7% or less, p99..p99.99 within 2.6x of no-GC.
    let s = tol_ssd.stats();
    let blocked = s.gc_blocked_reads as f64 / s.reads as f64;
    assert!(blocked <= 0.007, "tolerant: {:.3}% blocked", 100.0 * blocked);
    assert!(s.parity_rebuilds > 0);
    for p in [0.99, 0.999, 0.9999] {
        assert!(
            q(&tol, p) <= 2.6 * q(&nogc, p),
            "p{}: {} vs {}",
            p * 100.0,
            q(&tol, p),
            q(&nogc, p)
        );
    }
}

#[test]
fn plane_blocking_gc_leaves_the_channel_free() {
    // The same GCs; with copyback the channel is not taken, so transfers of other planes on
    // the channel are never later than in the base design.
    let cfg = SsdConfig::enterprise();
    let (base, _) = run(&cfg, GcMode::Base, 8000.0, 30_000);
    let (pb, _) = run(&cfg, GcMode::PlaneBlocking, 8000.0, 30_000);
    let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len() as f64;
    assert!(mean(&pb) <= mean(&base));
}

#[test]
fn at_low_load_latency_is_the_service_time() {
    let cfg = SsdConfig::consumer();
    let mut ssd = Ssd::new(cfg.clone(), GcMode::Base);
    ssd.precondition(0.0, 1);
    let xfer = cfg.page_bytes * 1_000_000_000 / cfg.channel_bytes_per_s;
    // Reads far apart: controller + tR + one page over the channel, exactly.
    for (i, page) in [5u64, 77_777, 123].iter().enumerate() {
        let t = (i as u64 + 1) * 1_000_000_000;
        let done = ssd.submit(t, page * cfg.page_bytes, 4096, false);
        assert_eq!(done - t, cfg.controller_ns + cfg.read_ns + xfer);
    }
    // A write is acknowledged from the buffer.
    let t = 10_000_000_000;
    assert_eq!(ssd.submit(t, 0, cfg.page_bytes, true) - t, cfg.controller_ns + 2_000);
    // A read of a page still in the buffer is served from it.
    assert_eq!(ssd.submit(t + 1, 0, 4096, false) - (t + 1), cfg.controller_ns + 2_000);
}

#[test]
fn the_ftl_conserves_pages_under_random_writes_and_gc() {
    // Property: for many seeds and mixes, after writes, overwrites, flushes and GCs every
    // logical page is stored exactly once, where the map says.
    let mut cfg = SsdConfig::consumer();
    cfg.channels = 2;
    cfg.chips_per_channel = 1;
    cfg.blocks_per_plane = 32;
    cfg.pages_per_block = 16;
    cfg.buffer_pages = 37;
    cfg.parity_group = 4; // two parity groups
    for seed in 0..20u64 {
        for mode in [GcMode::Base, GcMode::Tolerant, GcMode::Preemptive] {
            let mut ssd = Ssd::new(cfg.clone(), mode);
            ssd.precondition((seed % 3) as f64 * 0.5, seed);
            let mut rng = Rng::new(seed);
            let pages = ssd.logical_pages();
            let mut t = 0;
            let mut reads = 0;
            for i in 0..3_000 {
                if i % 500 == 0 {
                    ssd.check()
                        .unwrap_or_else(|e| panic!("seed {seed} {mode:?} request {i}: {e}"));
                }
                t += rng.below(200_000) as u64;
                let write = rng.next_f64() < 0.8;
                let len = cfg.page_bytes * (1 + rng.below(3) as u64);
                let done = ssd.submit(t, (rng.next_u64() % pages) * cfg.page_bytes, len, write);
                assert!(done >= t);
                reads += u64::from(!write);
            }
            ssd.flush(t);
            ssd.check().unwrap_or_else(|e| panic!("seed {seed} {mode:?}: {e}"));
            let s = ssd.stats();
            assert_eq!(s.reads, reads, "every read counted once");
            assert!(s.gcs > 0, "GC ran");
        }
    }
}

/// Like `run`, with a custom combination of designs; returns the stats.
fn run_designs(cfg: &SsdConfig, d: iolearn_flash::ssd::Designs, iops: f64, n: usize) -> iolearn_flash::ssd::SsdStats {
    replay(Ssd::with_designs(cfg.clone(), d), n, |_| (iops, 0.7)).1.stats()
}

#[test]
fn each_tinytailflash_design_has_its_effect() {
    use iolearn_flash::ssd::Designs;
    // The consumer drive collects 10% of the time: enough GC overlap to see each design.
    let cfg = SsdConfig::consumer();
    let g = cfg.parity_group as u64;
    let plane = Designs {
        copyback: true,
        ..Designs::default()
    };
    let rain = Designs { rain: true, ..plane };
    let unrotated = Designs {
        parity_reads: true,
        ..rain
    };
    let rotating = Designs {
        rotating_gc: true,
        ..unrotated
    };
    let flush = Designs {
        tolerant_flush: true,
        ..rotating
    };
    let blocked = |s: iolearn_flash::ssd::SsdStats| s.gc_blocked_reads as f64 / s.reads as f64;
    let (sp, sr, su, so, sf) = (
        run_designs(&cfg, plane, 1000.0, 40_000),
        run_designs(&cfg, rain, 1000.0, 40_000),
        run_designs(&cfg, unrotated, 1000.0, 40_000),
        run_designs(&cfg, rotating, 1000.0, 40_000),
        run_designs(&cfg, flush, 1000.0, 40_000),
    );
    // RAIN costs capacity (one page in g holds parity) and writes: a parity page per stripe
    // of at most g - 1 data pages, mostly full ones (open stripes' parity is still in RAM).
    let cap = |d| Ssd::with_designs(cfg.clone(), d).logical_pages();
    let (plain, with) = (cap(plane), cap(rain));
    assert!((with * g).abs_diff(plain * (g - 1)) <= g * g, "{with} of {plain}");
    assert_eq!(sp.parity_pages, 0);
    let data = sr.pages_programmed - sr.parity_pages;
    assert!(
        sr.parity_pages * (g - 1) + cfg.planes() as u64 >= data && sr.parity_pages * (g - 1) <= data * 12 / 10,
        "{} parity pages for {data} data pages",
        sr.parity_pages
    );
    let wa = |s: iolearn_flash::ssd::SsdStats| s.pages_programmed as f64 / s.writes as f64;
    assert!(wa(sr) > 1.1 * wa(sp), "WA {:.2} vs {:.2}", wa(sr), wa(sp));
    // Rebuilding from parity needs the rest of the stripe readable: a superblock collected on
    // every plane at once leaves nothing to rebuild from; rotating GC does.
    assert!(
        su.parity_rebuilds * 10 <= so.parity_rebuilds,
        "{} vs {}",
        su.parity_rebuilds,
        so.parity_rebuilds
    );
    assert!(
        blocked(su) > 0.5 * blocked(sp),
        "{:.4} vs {:.4}",
        blocked(su),
        blocked(sp)
    );
    assert!(
        blocked(so) < blocked(su) / 10.0,
        "rotating {:.4} vs {:.4}",
        blocked(so),
        blocked(su)
    );
    // A tolerant flush stops programming into planes under GC (which would queue behind it).
    assert!(
        so.flush_into_gc > 0 && sf.flush_into_gc < so.flush_into_gc / 10,
        "{} vs {}",
        sf.flush_into_gc,
        so.flush_into_gc
    );
}

#[test]
fn peeking_a_read_predicts_it_exactly_and_changes_nothing() {
    // Two drives fed the same write-heavy stream; one is peeked before every request. Each
    // peeked read completes when the peek said, and the two drives never diverge (preemptive
    // GC included: a peek runs pending GC steps and must put them back).
    let cfg = SsdConfig::consumer();
    for mode in [GcMode::Base, GcMode::Preemptive, GcMode::Tolerant] {
        let (mut a, mut b) = (Ssd::new(cfg.clone(), mode), Ssd::new(cfg.clone(), mode));
        a.precondition(1.0, 3);
        b.precondition(1.0, 3);
        let mut rng = Rng::new(5);
        let pages = a.logical_pages();
        let mut t = 0u64;
        let mut checked = 0;
        for _ in 0..20_000 {
            t += (-(1.0 - rng.next_f64()).ln() / 6000.0 * 1e9) as u64;
            let off = (rng.next_u64() % pages) * cfg.page_bytes;
            let len = cfg.page_bytes * (1 + rng.below(3) as u64);
            let write = rng.next_f64() < 0.6;
            let peeked = a.peek_read(t, off, len);
            let done_a = a.submit(t, off, len, write);
            let done_b = b.submit(t, off, len, write);
            assert_eq!(done_a, done_b, "{mode:?}: a peek changed the drive");
            if !write {
                assert_eq!(peeked, done_a, "{mode:?}: peek and the read disagree");
                checked += 1;
            }
        }
        assert!(checked > 5000);
        assert_eq!(a.stats(), b.stats());
    }
}

#[test]
fn geometry_and_timing_come_from_toml_files_checked_field_by_field() {
    // The built-in presets are files, and they parse into what the simulator always ran.
    let names: Vec<_> = SsdConfig::preset_names().collect();
    assert_eq!(names, ["consumer", "enterprise"]);
    let e = SsdConfig::enterprise();
    assert_eq!(
        (e.channels, e.chips_per_channel, e.planes(), e.read_ns),
        (16, 4, 256, 60_000)
    );
    let c = SsdConfig::consumer();
    assert_eq!(
        (c.channels, c.blocks_per_plane, c.erase_ns, c.buffer_pages),
        (8, 256, 3_800_000, 1024)
    );
    // A configuration written out reads back the same.
    let text = toml::to_string(&e).unwrap();
    assert_eq!(SsdConfig::from_toml(&text).unwrap(), e);
    // Errors name the field (and the line where TOML knows it).
    let swap = |field: &str, value: &str| {
        text.lines()
            .map(|l| {
                if l.starts_with(&format!("{field} =")) {
                    format!("{field} = {value}")
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    for (field, value) in [
        ("channels", "0"),
        ("read_ns", "0"),
        ("page_bytes", "1000"),
        ("over_provisioning", "nan"),
        ("parity_group", "100000"),
        ("parity_group", "3"),
        ("gc_threshold_blocks", "200"),
        ("blocks_per_plane", "1048576"),
    ] {
        let err = SsdConfig::from_toml(&swap(field, value)).unwrap_err();
        let shown = if field == "blocks_per_plane" { "geometry" } else { field };
        assert!(err.contains(shown), "{field} = {value}: {err}");
    }
    let err = SsdConfig::from_toml(&format!("{text}\nturbo = true\n")).unwrap_err();
    assert!(err.contains("turbo"), "{err}");
    let err = SsdConfig::from_toml(&text.replace("erase_ns", "#erase_ns")).unwrap_err();
    assert!(err.contains("erase_ns"), "{err}");
    let err = SsdConfig::from_toml("channels = \"many\"").unwrap_err();
    assert!(err.contains("line 1"), "{err}");
}

/// Read latencies (ns, sorted) and the drive after on/off write bursts on a preconditioned
/// drive: `burst_iops` for `on_s` seconds (90% writes), then 1,000 IOPS for `off_s` (30%
/// writes), repeated.
fn run_bursty(cfg: &SsdConfig, mode: GcMode, burst_iops: f64, on_s: f64, off_s: f64, n: usize) -> (Vec<u64>, Ssd) {
    let (on, period) = ((on_s * 1e9) as u64, ((on_s + off_s) * 1e9) as u64);
    replay(Ssd::new(cfg.clone(), mode), n, |t| {
        if t % period < on {
            (burst_iops, 0.9)
        } else {
            (1000.0, 0.3)
        }
    })
}

#[test]
fn preemptive_gc_hides_in_idle_time_and_spikes_when_bursts_exhaust_the_planes() {
    // The baseline TinyTailFlash compares with: with idle time between requests a read waits
    // for one GC step at most, so the tail is near no-GC's and far below plane-blocking GC's;
    // no plane ever runs short.
    let cfg = SsdConfig::enterprise();
    let (nogc, _) = run(&cfg, GcMode::NoGc, 8000.0, 60_000);
    let (pb, _) = run(&cfg, GcMode::PlaneBlocking, 8000.0, 60_000);
    let (pre, pre_ssd) = run(&cfg, GcMode::Preemptive, 8000.0, 60_000);
    let s = pre_ssd.stats();
    assert!(s.gcs > 0 && s.gc_forced == 0, "{s:?}");
    assert!(
        q(&pre, 0.999) <= 2.0 * q(&nogc, 0.999),
        "{} vs no-GC {}",
        q(&pre, 0.999),
        q(&nogc, 0.999)
    );
    assert!(
        q(&pre, 0.999) * 10.0 <= q(&pb, 0.999),
        "{} vs plane-blocking {}",
        q(&pre, 0.999),
        q(&pb, 0.999)
    );
    // Write bursts that leave no idle time: collections pile up until a plane runs short and
    // they all run at once, unpreempted: the spikes TinyTailFlash reports for preemptive GC.
    let cfg = SsdConfig::consumer();
    let (nogc, _) = run_bursty(&cfg, GcMode::NoGc, 8000.0, 1.0, 4.0, 100_000);
    let (pre, pre_ssd) = run_bursty(&cfg, GcMode::Preemptive, 8000.0, 1.0, 4.0, 100_000);
    assert!(pre_ssd.stats().gc_forced > 0);
    assert!(
        q(&pre, 0.999) >= 20.0 * q(&nogc, 0.999),
        "{} vs no-GC {}",
        q(&pre, 0.999),
        q(&nogc, 0.999)
    );
}

#[test]
fn rotating_gc_collects_one_plane_of_a_group_at_a_time() {
    // TinyTailFlash's guarantee: with one plane of a parity group collecting, the rest of any
    // stripe can be read. Checked on the drive's own view at every 50th request of a steady
    // write-heavy load (the group never runs out of free superblocks at this load).
    let cfg = SsdConfig::consumer();
    let g = cfg.parity_group;
    let mut ssd = Ssd::new(cfg.clone(), GcMode::Tolerant);
    ssd.precondition(1.0, 7);
    let mut rng = Rng::new(9);
    let pages = ssd.logical_pages();
    let (mut t, mut seen_gc) = (0u64, 0);
    for i in 0..60_000 {
        t += (-(1.0 - rng.next_f64()).ln() / 1000.0 * 1e9) as u64;
        let off = (rng.next_u64() % pages) * cfg.page_bytes;
        ssd.submit(t, off, cfg.page_bytes, rng.next_f64() < 0.7);
        if i % 50 == 0 {
            let w = ssd.white_box(t);
            for (gi, group) in w.gc_active.chunks(g).enumerate() {
                let n = group.iter().filter(|&&a| a).count();
                assert!(n <= 1, "request {i}: {n} planes of group {gi} collecting");
                seen_gc += n;
            }
        }
    }
    assert!(seen_gc > 100, "GC was seen running {seen_gc} times");
}

#[test]
fn nand_varies_only_when_asked_and_the_peek_still_sees_it_exactly() {
    let base = SsdConfig::consumer();
    let varied = SsdConfig {
        read_retry_share: 0.2,
        read_retry_ns: 100_000,
        program_spread: 0.3,
        ..base.clone()
    };
    // Lone reads of random pages on an idle drive, 10 ms apart.
    let lone_reads = |cfg: &SsdConfig| {
        let mut ssd = Ssd::new(cfg.clone(), GcMode::Base);
        ssd.precondition(0.0, 3);
        let mut rng = Rng::new(9);
        let mut lat = Vec::new();
        for k in 1..=2_000u64 {
            let t = k * 10_000_000;
            let off = (rng.next_u64() % ssd.logical_pages()) * cfg.page_bytes;
            let peek = ssd.peek_read(t, off, 4096);
            let done = ssd.submit(t, off, 4096, false);
            assert_eq!(peek, done, "the peek draws what the read then draws");
            lat.push(done - t);
        }
        lat
    };
    let plain = lone_reads(&base);
    assert!(plain.iter().all(|&l| l == plain[0]), "no variability by default");
    let lat = lone_reads(&varied);
    let retried = lat.iter().filter(|&&l| l == plain[0] + 100_000).count();
    assert_eq!(retried + lat.iter().filter(|&&l| l == plain[0]).count(), lat.len());
    assert!(
        (300..500).contains(&retried),
        "{retried} of 2,000 reads retried (20% asked)"
    );
    // Programs: a one-page flush at a time, 10 ms apart, on lower pages of each plane in turn.
    let flush_times = |cfg: &SsdConfig| {
        let mut ssd = Ssd::new(cfg.clone(), GcMode::Base);
        let mut out = Vec::new();
        for k in 1..=400u64 {
            let t = k * 10_000_000;
            ssd.submit(t, k * cfg.page_bytes, 4096, true);
            out.push(ssd.flush(t) - t);
        }
        out
    };
    let plain = flush_times(&base);
    let spread = flush_times(&varied);
    let (lo, hi) = (*spread.iter().min().unwrap(), *spread.iter().max().unwrap());
    let upper = *plain.iter().max().unwrap();
    assert!(
        lo >= plain.iter().min().unwrap() * 6 / 10 && hi <= upper * 14 / 10,
        "{lo}..{hi}"
    );
    assert!(hi - lo > upper / 2, "programs spread: {lo}..{hi}");
    // The fields are checked, and absent from a TOML file they are zero.
    let bad = SsdConfig {
        read_retry_share: 1.5,
        ..base.clone()
    };
    assert!(bad.check_ranges().unwrap_err().starts_with("read_retry_share"));
    let bad = SsdConfig {
        program_spread: f64::NAN,
        ..base
    };
    assert!(bad.check_ranges().unwrap_err().starts_with("program_spread"));
    assert_eq!(SsdConfig::consumer().read_retry_share, 0.0);
}
