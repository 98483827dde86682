//! Replicated storage for the tail-latency work (MittOS, LinnOS, ML-MittOS): N replicas, each
//! its own device and noise, a network hop between client and replica, and the client moves a
//! policy makes: submit, revoke (EBUSY), fail over, hedge after a delay, clone, cancel. The last
//! replica always serves (`shared/spec/ml-mittos.md` section 4, `tail-latency.md` section 8).

use crate::device::Device;
use crate::ssd::Ssd;
use iolearn_ml::Rng;

/// Something that serves block requests in time order.
pub trait Storage {
    /// Submit at `now_ns`; returns the completion time.
    fn submit(&mut self, now_ns: u64, offset: u64, len: u64, write: bool) -> u64;
    /// When a read submitted at `now_ns` would complete, without serving it (the perfect
    /// predictor's view), where the storage can tell; `None` otherwise.
    fn peek(&mut self, _now_ns: u64, _offset: u64, _len: u64) -> Option<u64> {
        None
    }
    /// What the device would show a white-box predictor about a read of `len` bytes at
    /// `offset` at `now_ns` (MittSSD); zeros for black boxes.
    fn state(&mut self, _now_ns: u64, _offset: u64, _len: u64) -> DeviceState {
        DeviceState::default()
    }
}

/// A device's inside as seen by one request (white-box predictors: MittSSD, MittNOOP).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceState {
    /// Until the target plane (chip) is free; on a disk, until the disk is (MittNOOP's
    /// next-free time).
    pub plane_wait_ns: u64,
    /// Until the target channel's last booking ends.
    pub channel_wait_ns: u64,
    /// The target plane is collecting garbage.
    pub gc_active: bool,
    /// Pages in the write buffer.
    pub buffered_pages: u32,
    /// The request's own service time where the device model gives it (a disk: seek,
    /// rotation and transfer from the head's position); 0 on an SSD (MittSSD adds the page
    /// read itself).
    pub service_ns: u64,
}

impl Storage for Ssd {
    fn submit(&mut self, now_ns: u64, offset: u64, len: u64, write: bool) -> u64 {
        Ssd::submit(self, now_ns, offset, len, write)
    }
    fn state(&mut self, now_ns: u64, offset: u64, len: u64) -> DeviceState {
        Ssd::state(self, now_ns, offset, len)
    }
    fn peek(&mut self, now_ns: u64, offset: u64, len: u64) -> Option<u64> {
        Some(self.peek_read(now_ns, offset, len))
    }
}

impl Storage for Device {
    fn submit(&mut self, now_ns: u64, offset: u64, len: u64, write: bool) -> u64 {
        Device::submit(self, now_ns, offset, len, write)
    }
    fn state(&mut self, now_ns: u64, offset: u64, len: u64) -> DeviceState {
        DeviceState {
            plane_wait_ns: self.next_free_ns().saturating_sub(now_ns),
            service_ns: self.access_ns(offset, false) + self.transfer_ns(len.max(1)),
            ..DeviceState::default()
        }
    }
    fn peek(&mut self, now_ns: u64, offset: u64, len: u64) -> Option<u64> {
        // Small state: serve a copy.
        Some(self.clone().submit(now_ns, offset, len, false))
    }
}

/// A server with a fixed service time and no queue (for worked examples and closed forms).
#[derive(Debug, Clone, Copy)]
pub struct Fixed(pub u64);

impl Storage for Fixed {
    fn submit(&mut self, now_ns: u64, _: u64, _: u64, _: bool) -> u64 {
        now_ns + self.0
    }
    fn peek(&mut self, now_ns: u64, _: u64, _: u64) -> Option<u64> {
        Some(now_ns + self.0)
    }
}

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
}

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
            _ => return None,
        })
    }
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
}

impl Replica {
    /// A replica of `storage` with `noise`, seeded.
    pub fn new(storage: Box<dyn Storage>, noise: Noise, seed: u64) -> Replica {
        Replica {
            storage,
            noise,
            rng: Rng::new(seed),
            busy: (false, 0),
            slowdown: (1.0, 0),
        }
    }

    /// Latency multiplier and added ns at `now_ns` for one I/O.
    fn noise_at(&mut self, now_ns: u64) -> (f64, u64) {
        match self.noise.clone() {
            Noise::Quiet => (1.0, 0),
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
