//! Replicas and failover (issue 5, must-show 4; `shared/spec/ml-mittos.md` sections 3, 4, 6).

use iolearn_flash::replicas::{
    draw_slowdown, expected_latency, expected_latency_recursive, Cluster, Fixed, Noise, Replica, Storage,
};
use iolearn_ml::Rng;

#[test]
fn failover_reproduces_ml_mittos_worked_example() {
    // EBUSY at the first replica, 30 us hop, the second serves in 200 us: 230 us.
    let replicas = (0..3)
        .map(|i| Replica::new(Box::new(Fixed(200_000)), Noise::Quiet, i))
        .collect();
    let mut c = Cluster::new(replicas, 30_000, 1);
    let o = c.read_with(0, 0, 0, 4096, |r, _, _| r != 0);
    assert_eq!((o.done_ns, o.revoked), (230_000, 1));
    assert_ne!(o.served_by, 0);
    // The last replica always serves, even if every replica would refuse.
    let o = c.read_with(1_000_000, 0, 0, 4096, |_, _, _| false);
    assert_eq!((o.done_ns - 1_000_000, o.revoked), (2 * 30_000 + 200_000, 2));
    // One replica: no failover cost ever.
    let mut one = Cluster::new(vec![Replica::new(Box::new(Fixed(50_000)), Noise::Quiet, 0)], 30_000, 1);
    assert_eq!(one.read_with(0, 0, 0, 4096, |_, _, _| false).done_ns, 50_000);
}

#[test]
fn closed_form_equals_recursion_and_its_limits() {
    let mut rng = Rng::new(3);
    for _ in 0..1000 {
        let r = 1 + rng.below(6) as u32;
        let (f, p, tn, t) = (
            rng.next_f64() * 500.0,
            rng.next_f64() * 0.98,
            rng.next_f64() * 900.0,
            rng.next_f64() * 900.0,
        );
        let (a, b) = (
            expected_latency(r, f, p, tn, t),
            expected_latency_recursive(r, f, p, tn, t),
        );
        assert!(
            (a - b).abs() <= 1e-9 * b.abs().max(1.0),
            "r {r} f {f} p {p}: {a} vs {b}"
        );
    }
    assert_eq!(expected_latency(1, 30.0, 0.4, 100.0, 150.0), 150.0);
    assert!((expected_latency(3, 30.0, 0.0, 100.0, 150.0) - 100.0).abs() < 1e-9);
    assert!((expected_latency(3, 30.0, 1.0, 100.0, 150.0) - 210.0).abs() < 1e-9);
    assert!((expected_latency(3, 30.0, 0.999_999, 100.0, 150.0) - 210.0).abs() < 1e-3);
}

/// A server whose latency for a request at time `now` is an exponential draw (mean `mean_ns`)
/// keyed by `now` and the server: i.i.d. across attempts, and known before serving (a perfect
/// predictor can peek).
struct Drawn {
    seed: u64,
    mean_ns: f64,
}

impl Drawn {
    fn latency(&self, now_ns: u64) -> u64 {
        let mut r = Rng::new(now_ns.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ self.seed);
        (-(1.0 - r.next_f64()).ln() * self.mean_ns) as u64 + 1
    }
}

impl Storage for Drawn {
    fn submit(&mut self, now_ns: u64, _: u64, _: u64, _: bool) -> u64 {
        now_ns + self.latency(now_ns)
    }
    fn peek(&mut self, now_ns: u64, _: u64, _: u64) -> Option<u64> {
        Some(now_ns + self.latency(now_ns))
    }
}

#[test]
fn simulated_mean_latency_converges_to_the_closed_form() {
    // Exponential latencies, mean 200 us; replicas refuse what would take over 300 us.
    let (mean, thr, f) = (200_000.0f64, 300_000u64, 30_000u64);
    let p = (-(thr as f64) / mean).exp();
    // E[L | L <= T] for an exponential.
    let tn = (mean - (thr as f64 + mean) * p) / (1.0 - p);
    for r in [2u32, 3] {
        let replicas = (0..r)
            .map(|i| {
                Replica::new(
                    Box::new(Drawn {
                        seed: 10 + i as u64,
                        mean_ns: mean,
                    }),
                    Noise::Quiet,
                    0,
                )
            })
            .collect();
        let mut c = Cluster::new(replicas, f, 9);
        let n = 200_000;
        let mut total = 0f64;
        for k in 0..n {
            let now = k as u64 * 10_000_000;
            let o = c.read_with(now, k % r as usize, 0, 4096, |rep, t, cl| {
                cl.replicas[rep].peek(t, 0, 4096).is_none_or(|d| d - t <= thr)
            });
            total += (o.done_ns - now) as f64;
        }
        let sim = total / n as f64;
        let want = expected_latency(r, f as f64, p, tn, mean);
        assert!(
            (sim - want).abs() / want < 0.01,
            "r {r}: simulated {sim:.0} ns, closed form {want:.0} ns"
        );
    }
}

#[test]
fn hedging_cloning_and_noise() {
    let quiet = || Replica::new(Box::new(Fixed(100_000)), Noise::Quiet, 0);
    let slow = Replica::new(
        Box::new(Fixed(100_000)),
        Noise::FailSlow {
            factor: 10.0,
            from_ms: 0.0,
            for_ms: f64::INFINITY,
            share: 1.0,
        },
        0,
    );
    let mut c = Cluster::new(vec![slow, quiet(), quiet()], 15_000, 1);
    // The fail-slow replica takes 1 ms; a hedge after 200 us gets the answer at 315 us.
    assert_eq!(c.read(0, 0, 0, 4096).done_ns, 1_000_000);
    let h = c.hedged_read(10_000_000, 0, 0, 4096, 200_000);
    assert_eq!((h.done_ns - 10_000_000, h.duplicates), (315_000, 1));
    let cl = c.cloned_read(20_000_000, 0, 0, 4096, 2);
    assert_eq!((cl.done_ns - 20_000_000, cl.duplicates), (100_000, 1));
    // A transient fault ends.
    let mut t = Replica::new(
        Box::new(Fixed(100_000)),
        Noise::FailSlow {
            factor: 5.0,
            from_ms: 1.0,
            for_ms: 2.0,
            share: 1.0,
        },
        0,
    );
    assert_eq!(t.serve(0, 0, 4096, false), 100_000);
    assert_eq!(t.serve(2_000_000, 0, 4096, false) - 2_000_000, 500_000);
    assert_eq!(t.serve(4_000_000, 0, 4096, false) - 4_000_000, 100_000);
    // Busy periods take about the asked share of time.
    let mut b = Replica::new(
        Box::new(Fixed(100_000)),
        Noise::Busy {
            fraction: 0.25,
            busy_ms: 50.0,
            extra_us: 1000.0,
        },
        5,
    );
    let busy = (0..100_000u64)
        .filter(|k| b.serve(k * 1_000_000, 0, 4096, false) - k * 1_000_000 > 100_000)
        .count();
    assert!((busy as f64 / 1e5 - 0.25).abs() < 0.05, "busy {busy}");
    // TailAtStore slowdowns: 90% of draws at full speed, the worst 39x.
    let mut rng = Rng::new(1);
    let s: Vec<f64> = (0..100_000).map(|_| draw_slowdown(&mut rng)).collect();
    let at_speed = s.iter().filter(|&&x| x == 1.0).count() as f64 / 1e5;
    assert!((at_speed - 0.9).abs() < 0.01 && s.iter().all(|&x| (1.0..=39.0).contains(&x)));
}

#[test]
fn disk_fifo_matches_service_times_and_sstf_seeks_less() {
    use iolearn_flash::disk::{service_ns, simulate, Discipline, DiskRequest, NextFree};
    use iolearn_sim::device::DevicePreset;
    let p = DevicePreset::hdd();
    // Far apart in time: each completes after exactly its own service time.
    let reqs: Vec<DiskRequest> = (0..5)
        .map(|i| DiskRequest {
            arrival_ns: i * 1_000_000_000,
            offset: (i * 37 % 5) << 36,
            len: 4096,
        })
        .collect();
    let done = simulate(&p, &reqs, Discipline::Fifo);
    let mut head = 0;
    for (r, d) in reqs.iter().zip(&done) {
        assert_eq!(d - r.arrival_ns, service_ns(&p, head, r));
        head = r.offset + r.len;
    }
    // A burst of random requests: SSTF finishes the batch sooner than FIFO.
    let mut rng = Rng::new(4);
    let burst: Vec<DiskRequest> = (0..200)
        .map(|_| DiskRequest {
            arrival_ns: 0,
            offset: rng.next_u64() % (1 << 40),
            len: 4096,
        })
        .collect();
    let fifo = *simulate(&p, &burst, Discipline::Fifo).iter().max().unwrap();
    let sstf = *simulate(&p, &burst, Discipline::Sstf).iter().max().unwrap();
    assert!(sstf < fifo / 2, "sstf {sstf} fifo {fifo}");
    // MittNOOP's next-free bookkeeping with drift correction.
    let mut nf = NextFree::default();
    assert_eq!(nf.admit(100, 0, 4096, 1_000), 1_100);
    assert_eq!(nf.wait_ns(600), 500);
    nf.correct(1_100, 1_300);
    assert_eq!(nf.wait_ns(600), 700);
}

#[test]
fn tenant_noise_is_named_or_spelled_out_and_bad_spellings_are_refused() {
    use iolearn_flash::replicas::{Noise, Schedule, Tenant};
    for name in Noise::NAMES {
        assert!(Noise::preset(name, 3).is_some(), "{name}");
    }
    let v = Noise::preset("io:2500,32,0.25", 3).unwrap();
    assert_eq!(
        v[0],
        Noise::Io(Tenant {
            schedule: Schedule::OnOff {
                fraction: 0.25,
                busy_ms: 50.0
            },
            iops: 2500.0,
            kib: 32.0,
            read_share: 0.25
        })
    );
    assert_eq!(v.len(), 2, "EC2's schedule: two busy replicas");
    assert_eq!(Noise::preset("ec2-io", 3), Noise::preset("io:4000,64,0.5", 3));
    for bad in [
        "io:",
        "io:1,2",
        "io:1,2,3,4",
        "io:nan,64,0.5",
        "io:0,64,0.5",
        "io:100,0.1,0.5",
        "io:100,64,1.5",
        "loud",
    ] {
        assert!(Noise::preset(bad, 3).is_none(), "{bad}");
    }
}

#[test]
fn a_tenant_submits_at_its_rate_while_active_and_nothing_while_idle() {
    use iolearn_flash::replicas::{Noise, Replica, Schedule, Tenant};
    let tenant = |schedule| {
        Noise::Io(Tenant {
            schedule,
            iops: 10_000.0,
            kib: 4.0,
            read_share: 0.5,
        })
    };
    let count = |noise: Noise| {
        let mut r = Replica::new(Box::new(Fixed(50_000)), noise, 9);
        let mut n = 0usize;
        let mut last = 0;
        while let Some((io, _)) = r.serve_tenant_io() {
            assert!(io.0 >= last && io.1 % 4096 == 0 && io.2 == 4096);
            last = io.0;
            if io.0 > 10_000_000_000 {
                break;
            }
            n += 1;
        }
        n as f64 / 10.0 // per second over 10 s
    };
    let always = count(tenant(Schedule::OnOff {
        fraction: 0.999,
        busy_ms: 50.0,
    }));
    let quarter = count(tenant(Schedule::OnOff {
        fraction: 0.25,
        busy_ms: 50.0,
    }));
    assert!((always / 10_000.0 - 1.0).abs() < 0.05, "{always}");
    assert!((quarter / 2_500.0 - 1.0).abs() < 0.25, "{quarter}");
    // TailAtStore's draws leave a drive at speed 90% of the time: mostly idle.
    let tail = count(tenant(Schedule::TailAtStore { period_ms: 100.0 }));
    assert!(tail > 0.0 && tail < 0.1 * always, "{tail}");
    // Other kinds of noise have no tenant.
    assert!(Replica::new(Box::new(Fixed(1)), Noise::Quiet, 1)
        .next_tenant_io()
        .is_none());
}

#[test]
fn a_tenant_out_of_range_is_named_and_submits_nothing() {
    use iolearn_flash::replicas::{Noise, Replica, Schedule, Tenant};
    let ok = Tenant {
        schedule: Schedule::OnOff {
            fraction: 0.5,
            busy_ms: 10.0,
        },
        iops: 1000.0,
        kib: 4.0,
        read_share: 0.5,
    };
    assert!(ok.check().is_ok());
    for (bad, field) in [
        (
            Tenant {
                iops: f64::NAN,
                ..ok.clone()
            },
            "iops",
        ),
        (
            Tenant {
                iops: 1e12,
                ..ok.clone()
            },
            "iops",
        ),
        (Tenant { kib: 0.0, ..ok.clone() }, "kib"),
        (
            Tenant {
                read_share: -1.0,
                ..ok.clone()
            },
            "read_share",
        ),
        (
            Tenant {
                schedule: Schedule::OnOff {
                    fraction: 0.5,
                    busy_ms: 0.0,
                },
                ..ok.clone()
            },
            "busy_ms",
        ),
        (
            Tenant {
                schedule: Schedule::TailAtStore {
                    period_ms: f64::INFINITY,
                },
                ..ok.clone()
            },
            "period_ms",
        ),
    ] {
        let e = bad.check().unwrap_err();
        assert!(e.starts_with(field), "{e}");
        // Built anyway through the Rust API, it submits nothing (a NaN rate once looped).
        let r = Replica::new(Box::new(Fixed(1)), Noise::Io(bad), 1);
        assert!(r.next_tenant_io().is_none(), "{field}");
    }
    assert!(Replica::new(Box::new(Fixed(1)), Noise::Io(ok), 1)
        .next_tenant_io()
        .is_some());
}
