//! KML's readahead features on crafted and simulated event streams.

mod common;
use common::stream;
use iolearn_policy::readahead::{KmlFeatures, WindowStats};
use iolearn_policy::PageObservation;

fn obs(t: u64, inode: u64, index: u64) -> PageObservation {
    PageObservation {
        time_ns: t,
        inode,
        index,
        pid: 0,
    }
}

#[test]
fn features_follow_the_formulas() {
    let mut w = WindowStats::default();
    for i in [10u64, 12, 11, 20] {
        w.push(i);
    }
    let f = w.features(256);
    let xs = [10.0f64, 12.0, 11.0, 20.0];
    let mean = xs.iter().sum::<f64>() / 4.0;
    let m2: f64 = xs.iter().map(|x| (x - mean).powi(2)).sum();
    let range = 10.0;
    assert_eq!(f[0], 4.0);
    assert!((f[1] - m2 / 4.0 / range).abs() < 1e-12);
    assert!((f[2] - m2 / 3.0 / range).abs() < 1e-12);
    assert!((f[3] - (2.0 + 1.0 + 9.0) / 3.0).abs() < 1e-12);
    assert_eq!(f[4], 0.25);
}

#[test]
fn degenerate_windows_do_not_divide_by_zero() {
    let mut w = WindowStats::default();
    assert_eq!(w.features(16), [0.0, 0.0, 0.0, 0.0, 16.0 / 1024.0]);
    w.push(7);
    assert_eq!(w.features(16), [1.0, 0.0, 0.0, 0.0, 16.0 / 1024.0]);
    w.push(7);
    assert_eq!(w.features(16)[..4], [2.0, 0.0, 0.0, 0.0]);
}

#[test]
fn windows_split_by_time_and_files_separately() {
    let mut k = KmlFeatures::new(1_000, 0);
    let evs = [
        obs(0, 1, 5),
        obs(10, 2, 100),
        obs(20, 1, 6),
        obs(1_500, 1, 50),
        obs(3_200, 2, 9),
    ];
    let out = k.run(&evs, 256);
    assert_eq!(out.len(), 3, "windows [0,1000) [1000,2000) [2000,3000) closed");
    assert_eq!(out[0].device.unwrap()[0], 3.0);
    assert_eq!(out[0].files[&1][0], 2.0);
    assert_eq!(out[0].files[&1][3], 1.0, "per-file deltas ignore the other file");
    assert_eq!(out[0].device.unwrap()[3], (95.0 + 94.0) / 2.0);
    assert_eq!(out[1].files.len(), 1);
    assert!(out[2].device.is_none(), "an empty window is reported as empty");
}

#[test]
fn huge_page_indices_are_dropped_as_kml_does() {
    let mut k = KmlFeatures::new(1_000, 0);
    assert!(!k.observe(obs(0, 1, 2_000_000)));
    assert!(k.observe(obs(0, 1, 3)));
    assert_eq!(k.close(8, |_| 8).device.unwrap()[0], 1.0);
}

/// One simulated second of `kind` (a 256 MiB database, 96 MiB of cache, vanilla's 128 KiB):
/// its page events, readahead's insertions among them as the probes see them.
fn one_second_of(kind: iolearn_sim::workload::WorkloadKind) -> Vec<iolearn_sim::engine::PageEvent> {
    use iolearn_sim::device::DevicePreset;
    use iolearn_sim::engine::{Sim, SimConfig};
    use iolearn_sim::workload::DbShape;
    let mut cfg = SimConfig::calibration(kind, DevicePreset::nvme(), 128);
    cfg.db = DbShape::of_size(256 << 20);
    cfg.cache_bytes = 96 << 20;
    cfg.record_events = true;
    let mut sim = Sim::new(cfg);
    sim.run_until(1_000_000_000);
    sim.drain_events()
}

#[test]
fn sequential_and_random_streams_are_told_apart_by_the_features() {
    use iolearn_sim::workload::WorkloadKind;
    let delta_of = |kind| {
        let evs: Vec<PageObservation> = one_second_of(kind)
            .iter()
            .map(|e| obs(e.time_ns, e.file as u64, e.index))
            .collect();
        let mut k = KmlFeatures::new(1_000_000_000, 0);
        for e in &evs {
            k.observe(*e);
        }
        k.close(256, |_| 256).device.unwrap()[3]
    };
    let (seq, rnd) = (delta_of(WorkloadKind::ReadSeq), delta_of(WorkloadKind::ReadRandom));
    assert!(rnd > 20.0 * seq, "mean |delta|: readseq {seq}, readrandom {rnd}");
}

#[test]
fn leap_trend_is_a_verified_majority_of_recent_deltas() {
    let mut w = WindowStats::default();
    for i in 0..40u64 {
        w.push(1000 - i); // reverse scan: delta -1
    }
    assert_eq!(w.trend(), Some(-1));
    let mut r = WindowStats::default();
    for x in [5u64, 900, 17, 4000, 33, 2, 780, 41, 3000, 12] {
        r.push(x);
    }
    assert_eq!(r.trend(), None);
    // A recent trend wins even if older history was random.
    for i in 0..8u64 {
        r.push(5000 + 2 * i);
    }
    assert_eq!(r.trend(), Some(2));
}

#[test]
fn features_from_sums_equal_features_from_events() {
    // The in-kernel aggregation keeps sums; the features must not depend on which path
    // computed them.
    let idx: Vec<u64> = vec![5, 6, 7, 100, 101, 40, 999_000, 3, 3, 4];
    let mut w = WindowStats::default();
    let (mut sum, mut sq, mut abs) = (0u64, 0u64, 0u64);
    for (i, &x) in idx.iter().enumerate() {
        w.push(x);
        sum += x;
        sq += x * x;
        if i > 0 {
            abs += x.abs_diff(idx[i - 1]);
        }
    }
    let s = WindowStats::from_sums(idx.len() as u64, sum, sq, 3, 999_000, abs);
    let (a, b) = (w.features(256), s.features(256));
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() <= 1e-9 * x.abs().max(1.0), "{a:?} vs {b:?}");
    }
    assert_eq!(WindowStats::from_sums(0, 0, 0, 0, 0, 0).features(8)[0], 0.0);
}

#[test]
fn a_file_read_by_two_processes_has_a_stream_per_process() {
    // A scanner (pid 1) and a random reader (pid 2) on one file: per file the two interleave
    // into something neither is; per (process, file) each keeps its own pattern.
    let mut k = KmlFeatures::new(1_000_000_000, 0);
    let mut t = 0;
    for i in 0..200u64 {
        for (pid, index) in [(1, i), (2, (i * 7919) % 100_000)] {
            t += 1;
            k.observe(PageObservation {
                time_ns: t,
                inode: 5,
                index,
                pid,
            });
        }
    }
    let w = k.close(256, |_| 256);
    let scan = w.descriptions[&(1, 5)];
    let random = w.descriptions[&(2, 5)];
    let both = w.files[&5];
    assert_eq!((scan[0], random[0], both[0]), (200.0, 200.0, 400.0));
    assert_eq!(scan[3], 1.0, "the scanner's mean |delta| is one page");
    assert!(random[3] > 1000.0 && both[3] > 1000.0, "{random:?} {both:?}");
    // Observations without a process (pid 0) count for the file only.
    k.observe(PageObservation {
        time_ns: 2_000_000_000,
        inode: 6,
        index: 1,
        pid: 0,
    });
    let w = k.close(256, |_| 256);
    assert!(w.files.contains_key(&6) && w.descriptions.is_empty());
}

#[test]
fn the_shape_features_tell_direction_and_stride() {
    let shape = |idx: &mut dyn Iterator<Item = u64>| {
        let mut w = WindowStats::default();
        idx.for_each(|i| w.push(i));
        w.shape()
    };
    assert_eq!(shape(&mut (0..100)), [1.0, 0.0], "forward: no jumps");
    assert_eq!(shape(&mut (0..100).rev()), [-1.0, 1.0], "reverse: every jump -1");
    assert_eq!(shape(&mut (0..100).map(|i| 16 * i)), [1.0, 1.0], "strided");
    // Runs of 4 pages every 16, each page added then accessed (delta 0): the jumps are all 13.
    let runs: Vec<u64> = (0..50u64)
        .flat_map(|r| (0..4).flat_map(move |p| [16 * r + p; 2]))
        .collect();
    assert_eq!(shape(&mut runs.iter().copied()), [1.0, 1.0]);
    let mut rng = iolearn_ml::Rng::new(7);
    let random: Vec<u64> = (0..2000).map(|_| rng.below(1 << 20) as u64).collect();
    // Random: no regularity; its direction is wherever the last read fell.
    let [dir, reg] = shape(&mut random.iter().copied());
    assert!(dir.abs() <= 1.0 && reg < 0.01, "random: {dir} {reg}");
    assert_eq!(WindowStats::default().shape(), [0.0, 0.0]);
    // From sums: what the probes keep (a count of equal jumps above the pairs is clamped).
    let s = WindowStats::from_sums(3, 0, 0, 0, 32, 64).with_shape(32, 0, 1, 1);
    assert_eq!(s.shape(), [-1.0, 1.0]);
    assert_eq!(
        WindowStats::from_sums(3, 0, 0, 0, 32, 64)
            .with_shape(0, 32, 1, 5)
            .shape(),
        [1.0, 1.0]
    );
    assert_eq!(
        WindowStats::from_sums(3, 0, 0, 0, 32, 64).shape(),
        [0.0, 0.0],
        "no shape sums, no shape"
    );
}

#[test]
fn the_shape_features_separate_what_kmls_cannot_in_the_simulator() {
    use iolearn_sim::workload::WorkloadKind;
    // Each workload's busiest file over a second (the device's stream interleaves files, whose
    // page indices are their own).
    let of = |kind| {
        let mut files: std::collections::BTreeMap<u32, WindowStats> = Default::default();
        for e in one_second_of(kind) {
            files.entry(e.file).or_default().push(e.index);
        }
        files.values().max_by_key(|w| w.len()).unwrap().shape()
    };
    let (seq, rev) = (of(WorkloadKind::ReadSeq), of(WorkloadKind::ReadReverse));
    assert!(
        seq[0] > 0.5 && rev[0] < -0.5,
        "direction: readseq {seq:?}, readreverse {rev:?}"
    );
    let strided = of(WorkloadKind::FioStrided { pages: 1, stride: 16 });
    let random = of(WorkloadKind::FioRandom { pages: 1 });
    assert!(
        strided[1] > 0.5 && random[1] < 0.1,
        "regularity: strided {strided:?}, random {random:?}"
    );
}

#[test]
fn the_scale_free_features_read_the_same_on_a_file_a_hundred_times_larger() {
    use iolearn_policy::readahead::{scale_free, Outcome};
    // KML's mean |delta| grows with the file (a random reader of 2 GiB is out of the range of
    // one of 20 MiB); randomness and density do not, nor do the page cache's ratios.
    let outcome = Outcome {
        pages_accessed: 1000,
        pages_added: 250,
        misses: 40,
        ..Outcome::default()
    };
    for (pages, n) in [(5_000, 2_000), (500_000, 200_000)] {
        let [rnd_seq, den_seq] = stream(pages, n, false).scale();
        let [rnd_rand, den_rand] = stream(pages * 10, n, true).scale();
        assert!(rnd_seq < 0.1, "a scan steps a page: {rnd_seq}");
        assert!(rnd_rand > 0.85, "random reads jump across the file: {rnd_rand}");
        assert!(den_seq > 0.25 && den_rand < 0.05, "{den_seq} {den_rand}");
        let x = scale_free(&stream(pages, n, true).features_v2(256), &outcome);
        assert!(x.iter().all(|v| (-1.0..=1.0).contains(v)), "{x:?}");
        assert_eq!(x[4], (128f64).log2() / 13.0, "256 sectors are 128 KiB");
        assert_eq!((x[5], x[6]), ((1.25f64).log2() / 6.0, 0.04));
    }
    let small = stream(5_000, 2_000, true).features(256)[3];
    let large = stream(500_000, 200_000, true).features(256)[3];
    assert!(
        large > 50.0 * small,
        "KML's mean |delta| grows with the file: {small} {large}"
    );
    // The marker share: marker hits over marker hits, demand misses and faults.
    let seen = Outcome {
        marker_hits: 3,
        misses: 1,
        faults: 6,
        ..outcome.clone()
    };
    let x = scale_free(&stream(5_000, 2_000, false).features_v2(256), &seen);
    assert_eq!(x[7], 0.3);
    assert_eq!(x[7], iolearn_policy::readahead::marker_share(&seen));
    // Nothing seen: no division by zero.
    assert_eq!(iolearn_policy::readahead::marker_share(&Outcome::default()), 0.0);
    assert_eq!(WindowStats::default().scale(), [0.0, 0.0]);
    assert!(scale_free(&WindowStats::default().features_v2(0), &Outcome::default())
        .iter()
        .all(|v| v.is_finite()));
}
