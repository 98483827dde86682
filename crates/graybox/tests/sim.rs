//! The prober on simulated drives, its answers checked against their true geometry (which
//! the prober never reads): the two presets, and drives of random geometry and timing it was
//! not developed on.

use iolearn_flash::ssd::{GcMode, SsdConfig};
use iolearn_graybox::{probe_sim, Options, Prober, Report};

fn quiet(_: &str) {}

/// Probe fresh drives (one for the GC onset); the report and the true onset.
fn run(cfg: SsdConfig, o: &Options) -> (Report, Option<u64>) {
    let (r, truth) = probe_sim(&cfg, GcMode::Base, o, &mut quiet).expect("probe runs");
    (r, truth.gc_onset_bytes)
}

/// Every property the prober reports against the drive's truth; the rows of a table.
fn check(cfg: &SsdConfig, r: &Report, gc_truth: Option<u64>) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut same = |what: &str, found: Option<u64>, truth: u64| {
        if found != Some(truth) {
            wrong.push(format!("{what}: found {found:?}, true {truth}"));
        }
    };
    same("unit_bytes", r.unit_bytes.value, cfg.page_bytes);
    // Planes behind one channel are out of sight when a page's transfer outlasts its read
    // (a pair waits a transfer whether or not it shares the plane): then the channels.
    let transfer_ns = cfg.page_bytes * 1_000_000_000 / cfg.channel_bytes_per_s;
    let visible = if transfer_ns >= cfg.read_ns {
        cfg.channels
    } else {
        cfg.planes()
    };
    same("parallel_units", r.parallel_units.value, visible as u64);
    same("channels", r.channels.value, cfg.channels as u64);
    // The timed flush to within 4% (the search stops at a 32nd of its lower bound).
    match r.flush_interval_ns.value {
        Some(f) if f.abs_diff(cfg.flush_interval_ns) * 25 <= cfg.flush_interval_ns => {}
        found => wrong.push(format!(
            "flush_interval_ns: found {found:?}, true {}",
            cfg.flush_interval_ns
        )),
    }
    // The buffer to within a unit or two (a timed flush can take the stalled write's page).
    let buffer = cfg.buffer_pages as u64 * cfg.page_bytes;
    match r.buffer_bytes.value {
        Some(b) if b.abs_diff(buffer) <= 2 * cfg.page_bytes => {}
        found => wrong.push(format!("buffer_bytes: found {found:?}, true {buffer}")),
    }
    // GC onset to within 1% of the capacity and two buffer fills of the first collection
    // (the host sees collections at buffer stalls).
    if let Some(truth) = gc_truth {
        match r.gc_onset_bytes.value {
            Some(g) if g.abs_diff(truth) as f64 <= 0.01 * r.capacity_bytes as f64 + 2.0 * buffer as f64 => {}
            found => wrong.push(format!("gc_onset_bytes: found {found:?}, true {truth}")),
        }
    }
    wrong
}

#[test]
fn the_presets_are_read_right() {
    for name in ["consumer", "enterprise"] {
        let cfg = SsdConfig::by_name(name).unwrap();
        let (r, gc) = run(cfg.clone(), &Options::default());
        assert!(gc.is_some(), "{name}: the GC probe made the drive collect");
        let wrong = check(&cfg, &r, gc);
        assert!(wrong.is_empty(), "{name}: {wrong:?}\n{r:#?}");
    }
}

#[test]
fn drives_of_random_geometry_are_read_right() {
    let mut failed = Vec::new();
    for seed in 1..=16 {
        let cfg = iolearn_graybox::random_drive(seed);
        let (r, gc) = run(cfg.clone(), &Options::default());
        let wrong = check(&cfg, &r, gc);
        eprintln!(
            "seed {seed}: truth {gc:?} capacity {} {:?} {} planes, {} channels, {} B pages, {} buffer pages: {wrong:?}",
            r.capacity_bytes,
            r.gc_onset_bytes,
            cfg.planes(),
            cfg.channels,
            cfg.page_bytes,
            cfg.buffer_pages
        );
        if gc.is_none() || !wrong.is_empty() {
            failed.push(format!("seed {seed} ({cfg:?}): gc {gc:?} {wrong:?}"));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// A device whose writes slow down gradually from a known point (a gentle cliff, as drives
/// whose collections start light show), with some jitter: writes take 10 us, times
/// 1 + (bytes past the onset / a tenth of the capacity), each +-20%.
struct Ramp {
    onset: u64,
    written: u64,
    now_ns: u64,
    x: u64,
    /// The host stops for a second once this much is written.
    pause_at: Option<u64>,
}

impl iolearn_graybox::Target for Ramp {
    fn name(&self) -> String {
        "ramp".into()
    }
    fn size_bytes(&self) -> u64 {
        1 << 30
    }
    fn block_bytes(&self) -> u64 {
        512
    }
    fn max_io_bytes(&self) -> u64 {
        1 << 20
    }
    fn depth(&self) -> usize {
        64
    }
    fn run(&mut self, ios: &[iolearn_graybox::Io], lat: &mut Vec<u64>) -> Result<(), iolearn_graybox::Error> {
        lat.clear();
        for io in ios {
            self.x = self
                .x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let jitter = 0.8 + 0.4 * ((self.x >> 33) as f64 / (1u64 << 31) as f64);
            let past = self.written.saturating_sub(self.onset) as f64 / (self.size_bytes() as f64 / 10.0);
            let t = (10_000.0 * (1.0 + past) * jitter) as u64;
            self.now_ns += t;
            if self.pause_at.is_some_and(|p| self.written >= p) {
                self.now_ns += 1_000_000_000;
                self.pause_at = None;
            }
            self.written += io.len;
            lat.push(t);
        }
        Ok(())
    }
    fn idle(&mut self, ns: u64) -> Result<(), iolearn_graybox::Error> {
        self.now_ns += ns;
        Ok(())
    }
    fn now_ns(&self) -> u64 {
        self.now_ns
    }
}

#[test]
fn a_pause_of_the_host_is_no_cliff_and_a_fall_in_the_fitted_half_is_no_onset() {
    // No slowdown at all, but the host stops for a second at 0.7x the capacity.
    let mut t = Ramp {
        onset: u64::MAX,
        written: 0,
        now_ns: 0,
        x: 7,
        pause_at: Some(((1u64 << 30) as f64 * 0.7) as u64),
    };
    let f = Prober::new(&mut t, &Options::default())
        .unwrap()
        .gc_onset(16384, &mut quiet)
        .unwrap();
    assert_eq!(f.value, None, "{}", f.how);
    // A fall at 0.3x: inside the half the line is fitted over, so no onset can be dated.
    let mut t = Ramp {
        onset: ((1u64 << 30) as f64 * 0.3) as u64,
        written: 0,
        now_ns: 0,
        x: 7,
        pause_at: None,
    };
    let f = Prober::new(&mut t, &Options::default())
        .unwrap()
        .gc_onset(16384, &mut quiet)
        .unwrap();
    assert_eq!(f.value, None, "{}", f.how);
    assert!(f.how.contains("inside the first half"), "{}", f.how);
}

#[test]
fn one_channel_and_a_page_past_the_largest_stride_are_told_as_they_are() {
    let one = SsdConfig {
        name: "one-channel".into(),
        channels: 1,
        planes_per_die: 2,
        chips_per_channel: 2,
        blocks_per_plane: 64,
        parity_group: 2,
        ..SsdConfig::by_name("consumer").unwrap()
    };
    let planes = one.planes() as u64;
    let (r, _) = run(
        one,
        &Options {
            gc: false,
            ..Options::default()
        },
    );
    assert_eq!(
        (r.parallel_units.value, r.channels.value),
        (Some(planes), Some(1)),
        "{r:#?}"
    );
    let big = SsdConfig {
        name: "big-pages".into(),
        page_bytes: 256 << 10,
        blocks_per_plane: 32,
        pages_per_block: 64,
        buffer_pages: 64,
        ..SsdConfig::by_name("consumer").unwrap()
    };
    let (r, _) = run(
        big,
        &Options {
            gc: false,
            ..Options::default()
        },
    );
    assert_eq!(r.unit_bytes.value, None, "{r:#?}");
    assert!(r.unit_bytes.how.starts_with("at least 128 KiB"), "{}", r.unit_bytes.how);
}

#[test]
fn a_gentle_cliff_is_dated_where_it_starts_not_where_it_is_obvious() {
    for onset_fraction in [0.8, 1.05, 1.5] {
        let onset = ((1u64 << 30) as f64 * onset_fraction) as u64;
        let mut t = Ramp {
            onset,
            written: 0,
            now_ns: 0,
            x: 7,
            pause_at: None,
        };
        let mut p = Prober::new(&mut t, &Options::default()).unwrap();
        let f = p.gc_onset(16384, &mut quiet).unwrap();
        let found = f.value.expect("a cliff");
        assert!(
            (found as f64 - onset as f64).abs() < 0.02 * (1u64 << 30) as f64,
            "onset at {onset_fraction}: found {found} ({})",
            f.how
        );
    }
}

#[test]
fn random_drives_are_valid_drives() {
    for seed in 0..2000 {
        let cfg = iolearn_graybox::random_drive(seed);
        assert!(cfg.check_ranges().is_ok(), "{seed}: {cfg:?}");
        assert!(cfg.buffer_pages as u64 * 64 <= cfg.logical_pages(), "{seed}");
    }
}

/// A device with noise: reads take 100 us, +-10%, and one I/O in 300 stalls 2 ms (a host's
/// hiccup). With `striped`, 16 KiB pages sit on 16 units over 4 channels in turn: two reads
/// together wait 75 us more on one unit, 20 us more on one channel.
struct Noisy {
    striped: bool,
    now_ns: u64,
    x: u64,
}

impl Noisy {
    fn jitter(&mut self) -> f64 {
        self.x = self
            .x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.x >> 33) as f64 / (1u64 << 31) as f64
    }
}

impl iolearn_graybox::Target for Noisy {
    fn name(&self) -> String {
        "noisy".into()
    }
    fn size_bytes(&self) -> u64 {
        1 << 30
    }
    fn block_bytes(&self) -> u64 {
        512
    }
    fn max_io_bytes(&self) -> u64 {
        1 << 20
    }
    fn depth(&self) -> usize {
        64
    }
    fn run(&mut self, ios: &[iolearn_graybox::Io], lat: &mut Vec<u64>) -> Result<(), iolearn_graybox::Error> {
        lat.clear();
        let pages: Vec<u64> = ios.iter().map(|io| io.offset / 16384).collect();
        for (k, io) in ios.iter().enumerate() {
            let mut t = if io.write { 10_000.0 } else { 100_000.0 };
            t *= 0.9 + 0.2 * self.jitter();
            if self.jitter() < 1.0 / 300.0 {
                t += 2_000_000.0;
            }
            if self.striped && !io.write && k > 0 {
                let d = pages[k].abs_diff(pages[0]);
                if d.is_multiple_of(16) {
                    t += 75_000.0;
                } else if d.is_multiple_of(4) {
                    t += 20_000.0;
                }
            }
            lat.push(t as u64);
        }
        self.now_ns += lat.iter().copied().max().unwrap_or(0) + 1_000;
        Ok(())
    }
    fn idle(&mut self, ns: u64) -> Result<(), iolearn_graybox::Error> {
        self.now_ns += ns;
        Ok(())
    }
    fn now_ns(&self) -> u64 {
        self.now_ns
    }
}

#[test]
fn noise_makes_no_collisions_and_hides_no_striping() {
    let o = Options {
        gc: false,
        max_writes: 20_000,
        max_distance: 128,
        ..Options::default()
    };
    for seed in 1..=12 {
        let mut flat = Noisy {
            striped: false,
            now_ns: 0,
            x: seed,
        };
        let mut p = Prober::new(&mut flat, &o).unwrap();
        let (_, units, channels) = p.parallelism(16384, &mut quiet).unwrap();
        assert_eq!(
            (units.value, channels.value),
            (None, None),
            "seed {seed}: {units:?} {channels:?}"
        );
        assert!(units.how.starts_with("no distance"), "seed {seed}: {}", units.how);
        let mut striped = Noisy {
            striped: true,
            now_ns: 0,
            x: seed,
        };
        let mut p = Prober::new(&mut striped, &o).unwrap();
        let (_, units, channels) = p.parallelism(16384, &mut quiet).unwrap();
        assert_eq!(
            (units.value, channels.value),
            (Some(16), Some(4)),
            "seed {seed}: {units:?} {channels:?}"
        );
    }
}
