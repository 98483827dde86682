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
fn a_gentle_cliff_is_dated_where_it_starts_not_where_it_is_obvious() {
    for onset_fraction in [0.8, 1.05, 1.5] {
        let onset = ((1u64 << 30) as f64 * onset_fraction) as u64;
        let mut t = Ramp {
            onset,
            written: 0,
            now_ns: 0,
            x: 7,
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
