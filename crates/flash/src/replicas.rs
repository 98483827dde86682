//! Replicated storage for the tail-latency work (MittOS, LinnOS, ML-MittOS): N replicas, each
//! its own device and noise, a network hop between client and replica, and the client moves a
//! policy makes: submit, revoke (EBUSY), fail over, hedge after a delay, clone, cancel. The last
//! replica always serves (`shared/spec/ml-mittos.md` section 4, `tail-latency.md` section 8).

pub use crate::storage::{DeviceState, Fixed, Storage};
use iolearn_ml::Rng;

/// Latency noise of one replica.
#[derive(Debug, Clone, PartialEq)]
pub enum Noise {
    /// None.
    Quiet,
    /// Busy periods (MittOS's EC2-derived noise: a node busy a fraction of the time): on/off
    /// periods with exponential lengths, mean busy `busy_ms`, busy `fraction` of the time; a
    /// busy replica adds `extra_us` to each I/O.
    Busy {
        /// Share of time busy.
        fraction: f64,
        /// Mean busy period, ms.
        busy_ms: f64,
        /// Added latency while busy, us.
        extra_us: f64,
    },
    /// TailAtStore slowdowns: every `period_ms` the replica's slowdown S is drawn from the
    /// field distribution (SSD percentiles p90..p99.999: 1.1, 1.2, 1.7, 3.1, 10, 39) and
    /// multiplies its latency.
    TailAtStore {
        /// How long one draw lasts (the study's unit was an hour; scale it to the run).
        period_ms: f64,
    },
    /// Fail-slow: latency x `factor` from `from_ms` for `for_ms` (`f64::INFINITY`:
    /// permanent), for a `share` of I/Os (1.0: all; less: a partial fault).
    FailSlow {
        /// Slowdown factor.
        factor: f64,
        /// Start, ms.
        from_ms: f64,
        /// Length, ms.
        for_ms: f64,
        /// Share of I/Os affected.
        share: f64,
    },
    /// Another tenant's I/O on the replica's device (MittOS's noise was other tenants'
    /// I/O on the same machine): its I/Os occupy the drive's channels and chips and join the
    /// replica's queue, so queue lengths, recent latencies and chip states show them, unlike
    /// the kinds above, which add latency from outside anything a predictor can see.
    Io(Tenant),
}

/// Another tenant's I/O stream on a replica's device.
#[derive(Debug, Clone, PartialEq)]
pub struct Tenant {
    /// When it is active.
    pub schedule: Schedule,
    /// I/Os per second while active (at full intensity).
    pub iops: f64,
    /// Size of its I/Os, KiB.
    pub kib: f64,
    /// Share of its I/Os that are reads.
    pub read_share: f64,
}

impl Tenant {
    /// Every field in range: 0.001 to 1e7 I/Os per second (at most one every 100 ns: the
    /// replay steps through each), 0.5 KiB to 64 MiB, a read share from 0 to 1, periods of
    /// 1 us to a day, an active share in (0, 1]. The error names the field.
    pub fn check(&self) -> Result<(), String> {
        let within = |name: &str, v: f64, lo: f64, hi: f64| {
            if v.is_finite() && (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(format!("{name}: {v} (must be {lo} to {hi})"))
            }
        };
        within("iops", self.iops, 1e-3, 1e7)?;
        within("kib", self.kib, 0.5, 65536.0)?;
        within("read_share", self.read_share, 0.0, 1.0)?;
        match self.schedule {
            Schedule::OnOff { fraction, busy_ms } => {
                within("fraction", fraction, 1e-6, 1.0)?;
                within("busy_ms", busy_ms, 1e-3, 86_400_000.0)
            }
            Schedule::TailAtStore { period_ms } => within("period_ms", period_ms, 1e-3, 86_400_000.0),
        }
    }
}

/// When a tenant submits I/O.
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    /// Active a `fraction` of the time in periods of mean `busy_ms` (exponential lengths,
    /// MittOS's EC2-derived busy nodes), idle between.
    OnOff {
        /// Share of time active.
        fraction: f64,
        /// Mean active period, ms.
        busy_ms: f64,
    },
    /// Every `period_ms` an intensity from TailAtStore's SSD slowdown distribution: a drawn
    /// slowdown S gives `(S - 1) / 2` of the full rate, capped at 1 (S = 1: idle; S >= 3: full).
    TailAtStore {
        /// How long one draw lasts, ms.
        period_ms: f64,
    },
}

/// One I/O of another tenant: (arrival ns, offset, bytes, write).
pub type TenantIo = (u64, u64, u64, bool);

impl Noise {
    /// Named noise for `replicas` replicas: `quiet`; `ec2` (MittOS's EC2-derived noise scaled
    /// to a few replicas: one busy 25% of the time, one 5%, +2 ms per I/O while busy, 50 ms
    /// busy periods); `tailatstore` (every replica draws a slowdown every 100 ms); `failslow`
    /// (replica 0 ten times slower throughout).
    pub fn preset(name: &str, replicas: usize) -> Option<Vec<Noise>> {
        let busy = |fraction| Noise::Busy {
            fraction,
            busy_ms: 50.0,
            extra_us: 2000.0,
        };
        Some(match name {
            "quiet" => Vec::new(),
            "ec2" => vec![busy(0.25), busy(0.05)],
            "tailatstore" => (0..replicas).map(|_| Noise::TailAtStore { period_ms: 100.0 }).collect(),
            "failslow" => vec![Noise::FailSlow {
                factor: 10.0,
                from_ms: 0.0,
                for_ms: f64::INFINITY,
                share: 1.0,
            }],
            // Other tenants' I/O on the device (`Noise::Io`). `ec2-io`: MittOS's schedule (one
            // replica busy 25% of the time, one 5%, 50 ms periods) filled with a tenant's 64 KiB
            // reads and writes at 4,000 per second (its writes wake the drive's GC: at 6,000 the
            // busy replica's p99 is ten times higher, at 2,000 about the same as quiet, on the
            // reference trace rw_40_60.1370 at 10x); `io:IOPS,KIB,READ_SHARE`: the same schedule
            // with another tenant; `tailatstore-io`: every replica's tenant intensity drawn
            // every 100 ms from TailAtStore's slowdowns (full rate, 8,000 per second, for
            // S >= 3); `bursty-io`: replica 0 in 5 ms bursts 10% of the time at 20,000 16 KiB
            // writes per second (a write buffer filling, GC behind it).
            "ec2-io" => return Noise::preset("io:4000,64,0.5", replicas),
            custom if custom.starts_with("io:") => {
                // `io:IOPS,KIB,READ_SHARE`: EC2's schedule with this tenant.
                let v: Vec<f64> = custom[3..]
                    .split(',')
                    .map(|x| x.trim().parse().ok().filter(|v: &f64| v.is_finite()))
                    .collect::<Option<_>>()?;
                let [iops, kib, read_share] = v[..] else { return None };
                let t = |fraction| Tenant {
                    schedule: Schedule::OnOff {
                        fraction,
                        busy_ms: 50.0,
                    },
                    iops,
                    kib,
                    read_share,
                };
                t(0.25).check().ok()?;
                vec![Noise::Io(t(0.25)), Noise::Io(t(0.05))]
            }
            "tailatstore-io" => (0..replicas)
                .map(|_| {
                    Noise::Io(Tenant {
                        schedule: Schedule::TailAtStore { period_ms: 100.0 },
                        iops: 8_000.0,
                        kib: 64.0,
                        read_share: 0.5,
                    })
                })
                .collect(),
            "bursty-io" => vec![Noise::Io(Tenant {
                schedule: Schedule::OnOff {
                    fraction: 0.1,
                    busy_ms: 5.0,
                },
                iops: 20_000.0,
                kib: 16.0,
                read_share: 0.0,
            })],
            _ => return None,
        })
    }

    /// The named kinds [`Noise::preset`] knows.
    pub const NAMES: [&'static str; 7] = [
        "quiet",
        "ec2",
        "tailatstore",
        "failslow",
        "ec2-io",
        "tailatstore-io",
        "bursty-io",
    ];
}

/// TailAtStore's SSD slowdown percentiles (`tail-latency.md` section 6): (cumulative
/// probability, slowdown). Below p90 the drive is at speed (S = 1).
const SSD_SLOWDOWN: [(f64, f64); 7] = [
    (0.90, 1.0),
    (0.95, 1.1),
    (0.99, 1.2),
    (0.999, 1.7),
    (0.9999, 3.1),
    (0.99999, 10.0),
    (1.0, 39.0),
];

/// Draw a slowdown from TailAtStore's SSD distribution (piecewise linear between the
/// published percentiles).
pub fn draw_slowdown(rng: &mut Rng) -> f64 {
    let u = rng.next_f64();
    let mut prev = (0.0, 1.0);
    for &(p, s) in &SSD_SLOWDOWN {
        if u <= p {
            let w = if p > prev.0 { (u - prev.0) / (p - prev.0) } else { 1.0 };
            return prev.1 + (s - prev.1) * w.clamp(0.0, 1.0);
        }
        prev = (p, s);
    }
    39.0
}

/// One replica: storage plus noise.
pub struct Replica {
    /// The device.
    pub storage: Box<dyn Storage>,
    /// Its noise.
    pub noise: Noise,
    rng: Rng,
    /// Busy-period state: (busy now, until ns).
    busy: (bool, u64),
    slowdown: (f64, u64),
    /// Another tenant's stream, if any: its own generator (so the other kinds' draws do not
    /// move), the active period (intensity, until ns), and its next I/O.
    tenant: Option<(Rng, (f64, u64), Option<TenantIo>)>,
}

impl Replica {
    /// A replica of `storage` with `noise`, seeded.
    pub fn new(storage: Box<dyn Storage>, noise: Noise, seed: u64) -> Replica {
        let tenant = matches!(noise, Noise::Io(_)).then(|| (Rng::new(seed ^ 0x7e4a_4e70), (0.0, 0), None));
        let mut r = Replica {
            storage,
            noise,
            rng: Rng::new(seed),
            busy: (false, 0),
            slowdown: (1.0, 0),
            tenant,
        };
        r.advance_tenant(0);
        r
    }

    /// The other tenant's next I/O (arrival order), if this replica has one.
    pub fn next_tenant_io(&self) -> Option<TenantIo> {
        self.tenant.as_ref().and_then(|t| t.2)
    }

    /// Submit the other tenant's next I/O to the device and draw the one after; returns it
    /// with its completion time.
    pub fn serve_tenant_io(&mut self) -> Option<(TenantIo, u64)> {
        let io = self.next_tenant_io()?;
        let done = self.storage.submit(io.0, io.1, io.2, io.3);
        self.advance_tenant(io.0);
        Some((io, done))
    }

    /// Draw the tenant's next I/O after `now_ns`: Poisson arrivals at the period's rate,
    /// periods skipped while idle.
    /// A tenant out of range ([`Tenant::check`]) submits nothing: [`Noise::preset`] never makes
    /// one, and a caller building its own checks it first.
    fn advance_tenant(&mut self, now_ns: u64) {
        let Noise::Io(spec) = &self.noise else { return };
        if spec.check().is_err() {
            self.tenant = None;
            return;
        }
        let cap = self.storage.capacity();
        let Some((rng, period, next)) = self.tenant.as_mut() else {
            return;
        };
        let exp = |rng: &mut Rng, mean: f64| -(1.0 - rng.next_f64()).ln() * mean;
        let mut t = now_ns as f64;
        loop {
            // Enter the period containing t (draw its intensity when it starts).
            while t >= period.1 as f64 {
                let (level, len_ns) = match spec.schedule {
                    Schedule::OnOff { fraction, busy_ms } => {
                        let fraction = fraction.clamp(1e-6, 0.999);
                        let active = period.0 == 0.0;
                        let mean_ms = if active {
                            busy_ms
                        } else {
                            busy_ms * (1.0 - fraction) / fraction
                        };
                        (if active { 1.0 } else { 0.0 }, exp(rng, mean_ms * 1e6))
                    }
                    Schedule::TailAtStore { period_ms } => {
                        (((draw_slowdown(rng) - 1.0) / 2.0).min(1.0), period_ms * 1e6)
                    }
                };
                *period = (level, period.1 + len_ns.max(1.0) as u64);
            }
            let rate = spec.iops * period.0 / 1e9;
            if rate <= 0.0 {
                t = period.1 as f64;
                continue;
            }
            let at = t + exp(rng, 1.0 / rate);
            if at >= period.1 as f64 {
                t = period.1 as f64; // memoryless: start over in the next period
                continue;
            }
            let len = ((spec.kib * 1024.0) as u64).clamp(512, 64 << 20) / 512 * 512;
            let offset = (rng.below((cap.saturating_sub(len) / 4096).max(1) as usize) as u64) * 4096;
            let write = rng.next_f64() >= spec.read_share;
            *next = Some((at as u64, offset, len, write));
            return;
        }
    }

    /// Latency multiplier and added ns at `now_ns` for one I/O.
    fn noise_at(&mut self, now_ns: u64) -> (f64, u64) {
        match self.noise.clone() {
            Noise::Quiet | Noise::Io(_) => (1.0, 0),
            Noise::Busy {
                fraction,
                busy_ms,
                extra_us,
            } => {
                let fraction = fraction.clamp(0.0, 0.999);
                while now_ns >= self.busy.1 {
                    let was_busy = self.busy.0;
                    let mean_ms = if was_busy {
                        busy_ms * (1.0 - fraction) / fraction.max(1e-9)
                    } else {
                        busy_ms
                    };
                    let len = -(1.0 - self.rng.next_f64()).ln() * mean_ms * 1e6;
                    self.busy = (!was_busy, self.busy.1 + len.max(1.0) as u64);
                }
                (1.0, if self.busy.0 { (extra_us * 1e3) as u64 } else { 0 })
            }
            Noise::TailAtStore { period_ms } => {
                while now_ns >= self.slowdown.1 {
                    self.slowdown = (
                        draw_slowdown(&mut self.rng),
                        self.slowdown.1 + (period_ms * 1e6).max(1.0) as u64,
                    );
                }
                (self.slowdown.0, 0)
            }
            Noise::FailSlow {
                factor,
                from_ms,
                for_ms,
                share,
            } => {
                let t = now_ns as f64 / 1e6;
                let on = t >= from_ms && t - from_ms < for_ms && self.rng.next_f64() < share;
                (if on { factor } else { 1.0 }, 0)
            }
        }
    }

    /// Serve one I/O at `now_ns` (arriving at the replica); returns its completion.
    pub fn serve(&mut self, now_ns: u64, offset: u64, len: u64, write: bool) -> u64 {
        let (mult, add) = self.noise_at(now_ns);
        let done = self.storage.submit(now_ns, offset, len, write);
        now_ns + ((done - now_ns) as f64 * mult) as u64 + add
    }

    /// When a read served at `now_ns` would complete, without serving it (noise included: the
    /// same draw the read would get), if the storage can tell.
    pub fn peek(&mut self, now_ns: u64, offset: u64, len: u64) -> Option<u64> {
        let saved = (self.rng.clone(), self.busy, self.slowdown);
        let (mult, add) = self.noise_at(now_ns);
        (self.rng, self.busy, self.slowdown) = saved;
        let done = self.storage.peek(now_ns, offset, len)?;
        Some(now_ns + ((done - now_ns) as f64 * mult) as u64 + add)
    }
}

/// What happened to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// When the client has its answer.
    pub done_ns: u64,
    /// The replica that served it.
    pub served_by: usize,
    /// Replicas that refused it (EBUSY) before.
    pub revoked: u32,
    /// Extra copies sent (hedges, clones).
    pub duplicates: u32,
}

/// N replicas and the network between them and the client.
pub struct Cluster {
    /// The replicas.
    pub replicas: Vec<Replica>,
    /// One network hop (client to replica), ns. Failing over costs one hop.
    pub hop_ns: u64,
    rng: Rng,
}

impl Cluster {
    /// A cluster with `hop_ns` per failover.
    pub fn new(replicas: Vec<Replica>, hop_ns: u64, seed: u64) -> Cluster {
        assert!(!replicas.is_empty(), "a cluster needs a replica");
        Cluster {
            replicas,
            hop_ns,
            rng: Rng::new(seed),
        }
    }

    /// The order a request tries replicas in: `first`, then the others in random order.
    fn order(&mut self, first: usize) -> Vec<usize> {
        let n = self.replicas.len();
        let mut rest: Vec<usize> = (0..n).filter(|&r| r != first % n).collect();
        self.rng.shuffle(&mut rest);
        std::iter::once(first % n).chain(rest).collect()
    }

    /// A read with admission control: `admit(replica, now_ns)` says whether replica serves
    /// (false: it answers EBUSY at once and the client fails over, paying one hop). The last
    /// replica tried always serves (its admission is not asked).
    pub fn read_with(
        &mut self,
        now_ns: u64,
        first: usize,
        offset: u64,
        len: u64,
        mut admit: impl FnMut(usize, u64, &mut Cluster) -> bool,
    ) -> Outcome {
        let order = self.order(first);
        let mut t = now_ns;
        for (revoked, &r) in order.iter().enumerate() {
            let last = revoked + 1 == order.len();
            if last || admit(r, t, self) {
                let done = self.replicas[r].serve(t, offset, len, false);
                return Outcome {
                    done_ns: done,
                    served_by: r,
                    revoked: revoked as u32,
                    duplicates: 0,
                };
            }
            t += self.hop_ns;
        }
        unreachable!("the last replica serves")
    }

    /// A plain read on `first`.
    pub fn read(&mut self, now_ns: u64, first: usize, offset: u64, len: u64) -> Outcome {
        self.read_with(now_ns, first, offset, len, |_, _, _| true)
    }

    /// Hedged read: if `first` has not answered after `delay_ns`, send a copy to another
    /// replica (one hop later); the first answer wins, the other copy is cancelled (its device
    /// work, already scheduled, still happens: a cancelled copy costs the replica anyway).
    pub fn hedged_read(&mut self, now_ns: u64, first: usize, offset: u64, len: u64, delay_ns: u64) -> Outcome {
        let order = self.order(first);
        let a = self.replicas[order[0]].serve(now_ns, offset, len, false);
        if a <= now_ns + delay_ns || order.len() == 1 {
            return Outcome {
                done_ns: a,
                served_by: order[0],
                revoked: 0,
                duplicates: 0,
            };
        }
        let t = now_ns + delay_ns + self.hop_ns;
        let b = self.replicas[order[1]].serve(t, offset, len, false);
        let (done_ns, served_by) = if b < a { (b, order[1]) } else { (a, order[0]) };
        Outcome {
            done_ns,
            served_by,
            revoked: 0,
            duplicates: 1,
        }
    }

    /// Cloned read: send to `copies` replicas at once; the first answer wins.
    pub fn cloned_read(&mut self, now_ns: u64, first: usize, offset: u64, len: u64, copies: usize) -> Outcome {
        let order = self.order(first);
        let k = copies.clamp(1, order.len());
        let (done_ns, served_by) = order[..k]
            .iter()
            .map(|&r| (self.replicas[r].serve(now_ns, offset, len, false), r))
            .min()
            .unwrap();
        Outcome {
            done_ns,
            served_by,
            revoked: 0,
            duplicates: k as u32 - 1,
        }
    }

    /// A write goes to every replica; done when all are (replication).
    pub fn write(&mut self, now_ns: u64, offset: u64, len: u64) -> u64 {
        (0..self.replicas.len())
            .map(|r| self.replicas[r].serve(now_ns, offset, len, true))
            .max()
            .unwrap()
    }
}

/// ML-MittOS's expected latency with `r` replicas, failover cost `f`, a share `p` of requests
/// predicted EBUSY, mean latency `tn` of those admitted and `t` overall (`ml-mittos.md` section
/// 3): the closed form; at `p = 1`, `t + (r - 1) f`.
pub fn expected_latency(r: u32, f: f64, p: f64, tn: f64, t: f64) -> f64 {
    if r <= 1 {
        return t;
    }
    if (p - 1.0).abs() < 1e-12 {
        return t + (r - 1) as f64 * f;
    }
    let pr = p.powi(r as i32);
    let pr1 = p.powi(r as i32 - 1);
    ((f - tn + t) * pr + (tn - t) * pr1 + (tn - f) * p - tn) / (p - 1.0)
}

/// The same by its recursion: mu(1) = t, mu(r) = (1 - p) tn + p (mu(r - 1) + f).
pub fn expected_latency_recursive(r: u32, f: f64, p: f64, tn: f64, t: f64) -> f64 {
    (1..r).fold(t, |mu, _| (1.0 - p) * tn + p * (mu + f))
}
