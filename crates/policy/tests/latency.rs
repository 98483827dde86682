//! Latency-prediction inputs and decisions (issue 6, must-show 1: `shared/spec/ml-mittos.md`
//! section 6 and LinnOS's inflection point on a distribution with a known answer).

use iolearn_ml::Rng;
use iolearn_policy::latency::{
    best_threshold, expected_latency_at, golden_threshold, inflection_point, LatencyHistory,
};

#[test]
fn mittos_features_of_the_worked_example() {
    // Current queue 3; the previous request took 142 us with 1 pending.
    let mut h = LatencyHistory::default();
    h.complete(142, 1);
    assert_eq!(h.mittos_features(3), [3.0, 142.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    // Newest first, four remembered.
    for (lat, p) in [(10, 2), (20, 3), (30, 4), (40, 5)] {
        h.complete(lat, p);
    }
    assert_eq!(h.mittos_features(0), [0.0, 40.0, 5.0, 30.0, 4.0, 20.0, 3.0, 10.0, 2.0]);
}

#[test]
fn linnos_digits() {
    let mut h = LatencyHistory::default();
    h.complete(12_345, 7); // capped at 9999
    h.complete(142, 1000); // pending capped at 999
    let f = h.linnos_features(42);
    let digits: String = f.iter().map(|d| char::from(b'0' + *d as u8)).collect();
    assert_eq!(f.len(), 31);
    // pending 042 | latencies 0142 9999 0000 0000 | pending 999 007 000 000
    assert_eq!(
        digits,
        "042".to_string() + "0142" + "9999" + "0000" + "0000" + "999" + "007" + "000" + "000"
    );
}

fn pairs(seed: u64, n: usize) -> Vec<(f64, f64)> {
    // A regressor that is right on average: actual = predicted x noise; 10% slow outliers.
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            let slow = rng.next_f64() < 0.1;
            let pred = if slow {
                2_000.0 + 3_000.0 * rng.next_f64()
            } else {
                100.0 + 100.0 * rng.next_f64()
            };
            (pred, pred * (0.7 + 0.6 * rng.next_f64()))
        })
        .collect()
}

#[test]
fn threshold_minimiser_agrees_with_brute_force() {
    for seed in 0..10 {
        let p = pairs(seed, 2_000);
        let (thr, m) = best_threshold(&p, 3, 30.0);
        // Brute force: every distinct prediction as the threshold (and "refuse everything").
        let mut cands: Vec<f64> = p.iter().map(|x| x.0).collect();
        cands.push(-1.0);
        let brute = cands
            .iter()
            .map(|&t| expected_latency_at(&p, t, 3, 30.0))
            .fold(f64::INFINITY, f64::min);
        assert!((m - brute).abs() <= 1e-9 * brute, "seed {seed}: {m} vs {brute}");
        assert!((expected_latency_at(&p, thr, 3, 30.0) - m).abs() <= 1e-9 * m);
        // Refusing the slow tenth is what pays: the threshold sits between the modes.
        assert!((150.0..2_000.0).contains(&thr), "seed {seed}: threshold {thr}");
        // The bounded scalar search never beats the exact scan, and lands on the same plateau here.
        let lo = p.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
        let hi = p.iter().map(|x| x.1).fold(0.0, f64::max);
        let (_, g) = golden_threshold(&p, 3, 30.0, lo, hi);
        assert!(g >= m - 1e-9 && g <= m * 1.05, "seed {seed}: golden {g} vs exact {m}");
    }
    // One replica: nothing to gain, mu = t whatever the threshold.
    let p = pairs(1, 500);
    let t = p.iter().map(|x| x.1).sum::<f64>() / 500.0;
    assert!((best_threshold(&p, 1, 30.0).1 - t).abs() < 1e-9);
}

#[test]
fn inflection_point_of_a_distribution_with_a_known_knee() {
    // 90% fast (100 +- 10 us), 10% slow (5 ms +- 0.5): the knee is at p90.
    let mut rng = Rng::new(7);
    let lat: Vec<f64> = (0..20_000)
        .map(|_| {
            if rng.next_f64() < 0.9 {
                100.0 + 10.0 * rng.normal()
            } else {
                5_000.0 + 500.0 * rng.normal()
            }
        })
        .collect();
    let (pct, thr) = inflection_point(&lat, 3, 15.0, 20_000, 1);
    assert!((85.0..=90.5).contains(&pct), "inflection point p{pct:.1} ({thr:.0} us)");
    assert!((100.0..1_000.0).contains(&thr), "threshold {thr}");
    // Move the knee to p75: the point follows.
    let lat: Vec<f64> = (0..20_000)
        .map(|_| {
            if rng.next_f64() < 0.75 {
                300.0 + 30.0 * rng.normal()
            } else {
                3_000.0 + 300.0 * rng.normal()
            }
        })
        .collect();
    let (p2, _) = inflection_point(&lat, 3, 15.0, 20_000, 1);
    assert!((70.0..=75.5).contains(&p2), "p{p2}");
}

#[test]
fn per_device_the_failed_over_tries_draw_from_the_other_devices() {
    use iolearn_policy::latency::inflection_point_per_device;
    // This device: 80% at 100 us, 20% at 2 ms. Revoking its slow reads pays when the others
    // are fast, and does not when a failed-over read lands on a device slower still.
    let mut rng = Rng::new(8);
    let own: Vec<f64> = (0..20_000)
        .map(|_| {
            if rng.next_f64() < 0.8 {
                100.0 + 5.0 * rng.normal()
            } else {
                2_000.0 + 50.0 * rng.normal()
            }
        })
        .collect();
    let fast: Vec<f64> = (0..20_000).map(|_| 100.0 + 5.0 * rng.normal()).collect();
    let slow: Vec<f64> = (0..20_000).map(|_| 5_000.0 + 50.0 * rng.normal()).collect();
    // The others' latencies the same as its own: the shared-sample IP.
    assert_eq!(
        inflection_point_per_device(&own, &own, 3, 15.0, 20_000, 2),
        inflection_point(&own, 3, 15.0, 20_000, 2)
    );
    let (p_fast, t_fast) = inflection_point_per_device(&own, &fast, 3, 15.0, 20_000, 2);
    let (p_slow, t_slow) = inflection_point_per_device(&own, &slow, 3, 15.0, 20_000, 2);
    // With fast peers the slow 20% are revoked (the IP below them); with slower peers revoking
    // costs more than it saves, so the IP moves up into (or past) the slow mode.
    assert!(t_fast < 1_000.0, "p{p_fast} {t_fast}");
    assert!(
        p_slow > p_fast && t_slow > t_fast,
        "fast peers p{p_fast} {t_fast}, slow peers p{p_slow} {t_slow}"
    );
}

#[test]
fn the_list_simulator_follows_ml_mittos_worked_example_and_converges_to_the_closed_form() {
    use iolearn_policy::latency::{expected_latency_at, simulate_list};
    // EBUSY at the first server, 30 us, then a 200 us read elsewhere: 230 us (every other
    // request of the list is a served 200 us read; a jump back to the first has odds 1/1000).
    let mut lat = vec![200.0; 1000];
    let mut busy = vec![false; 1000];
    (lat[0], busy[0]) = (5_000.0, true);
    let out = simulate_list(&lat, &busy, 3, 30.0, 1);
    assert_eq!(out[0], 230.0);
    assert!(out[1..].iter().all(|&l| l == 200.0));
    // One replica: no failover, whatever the predictions.
    assert_eq!(
        simulate_list(&[5_000.0, 200.0], &[true, true], 1, 30.0, 1),
        vec![5_000.0, 200.0]
    );
    // The mean over a long list converges to mu(T) (section 3's closed form).
    let mut rng = Rng::new(4);
    let pairs: Vec<(f64, f64)> = (0..200_000)
        .map(|_| {
            let actual = if rng.next_f64() < 0.8 { 100.0 } else { 3_000.0 };
            (actual * (0.5 + rng.next_f64()), actual) // a noisy prediction
        })
        .collect();
    let threshold = 1_000.0;
    let lat: Vec<f64> = pairs.iter().map(|p| p.1).collect();
    let ebusy: Vec<bool> = pairs.iter().map(|p| p.0 > threshold).collect();
    for r in [1, 2, 3, 5] {
        let sim = simulate_list(&lat, &ebusy, r, 30.0, 7);
        let mean = sim.iter().sum::<f64>() / sim.len() as f64;
        let mu = expected_latency_at(&pairs, threshold, r, 30.0);
        assert!(
            (mean / mu - 1.0).abs() < 0.01,
            "r={r}: simulated {mean}, closed form {mu}"
        );
    }
}
