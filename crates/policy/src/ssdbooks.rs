//! MittSSD keeping its own books (issue 13). MittOS's MittSSD ran on an open-channel SSD, whose
//! flash translation layer runs in the host: the host knows where every page lives and issues
//! every NAND command itself (reads, programs, garbage collection), and MittSSD kept per-chip
//! next-free times from those commands and the NAND's timing. This predictor does the same
//! from what such a host has: the page map (which plane holds a read's pages,
//! [`crate::admission::Started::planes`]), the commands as they are issued ([`NandCommand`]),
//! the data sheet's timing ([`SsdProfile`]) and the completions. It never reads when a command
//! ran: it computes it, with the data sheet's times and a plain per-channel queue, and corrects
//! itself from completions that come back early or late (a read overdue shows its plane stuck
//! on work the books missed). Its accuracy is therefore a measurement, unlike the white-box
//! [`crate::admission::MittSsd`], which reads the simulator's clocks.

use crate::admission::{Admission, IoView, Needs, Started};
use std::collections::{HashMap, VecDeque};

/// What a host knows of an SSD from its data sheet and its page map: geometry and timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SsdProfile {
    /// Planes (chips' planes: the units that read or program one page at a time).
    pub planes: u32,
    /// Channels; plane `p` sits on channel `p % channels`.
    pub channels: u32,
    /// Page read (sense), ns.
    pub read_ns: u64,
    /// Lower-page program, ns.
    pub program_lower_ns: u64,
    /// Upper-page program, ns.
    pub program_upper_ns: u64,
    /// Block erase, ns.
    pub erase_ns: u64,
    /// One page over the channel, ns.
    pub transfer_ns: u64,
    /// Controller overhead per request, ns.
    pub controller_ns: u64,
}

/// A NAND command as the host-side FTL issued it. (The simulated drive logs its own
/// `iolearn_flash::ssd::Command` of the same shape: the drive model does not depend on the
/// policies, and `iolearn-tail` translates.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NandCommand {
    /// When it was issued, ns.
    pub issued_ns: u64,
    /// The plane.
    pub plane: u32,
    /// What.
    pub op: NandOp,
}

/// A NAND operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NandOp {
    /// Sense a page, then send it over the channel.
    Read,
    /// Receive a page over the channel, then program it.
    Program {
        /// An upper page (the slower program).
        upper: bool,
    },
    /// Collect a block: move `moves` valid pages within the plane, then erase it.
    Collect {
        /// Pages moved.
        moves: u32,
        /// The pages cross the channel twice each (no copyback), from the collection's start.
        via_channel: bool,
    },
}

/// A DRAM copy (a page served from the write buffer, or never written), ns.
const DRAM_NS: u64 = 2_000;

/// Late reads whose lateness the books keep.
const LATENESS_KEPT: usize = 256;

/// A channel's transfers as the host booked them: busy intervals, in order, not overlapping. A
/// transfer goes in the first gap long enough after it is ready (a page read on a busy plane,
/// booked far ahead, does not hold up a transfer that is ready now). The drive keeps its own
/// calendar; this is the host's.
#[derive(Debug, Clone, Default)]
struct Calendar(Vec<(u64, u64)>);

impl Calendar {
    /// When a transfer of `len` ready at `t` would start.
    fn probe(&self, t: u64, len: u64) -> u64 {
        let mut s = t;
        for &(a, b) in &self.0[self.0.partition_point(|&(_, b)| b <= t)..] {
            if a >= s + len {
                break;
            }
            s = s.max(b);
        }
        s
    }

    /// Book a transfer of `len` ready at `t`; returns when it ends. Intervals over before `t`
    /// are forgotten (nothing is booked before what is being booked now, bar a page of slack).
    fn reserve(&mut self, t: u64, len: u64) -> u64 {
        let s = self.probe(t, len);
        let stale = self.0.partition_point(|&(_, b)| b + len < t);
        self.0.drain(..stale);
        let at = self.0.partition_point(|&(a, _)| a < s);
        self.0.insert(at, (s, s + len));
        s + len
    }
}

/// One drive's books.
#[derive(Debug, Clone, Default)]
struct Books {
    plane_free: Vec<u64>,
    channels: Vec<Calendar>,
    /// Per plane, when the last read booked there is sent (a started read's prediction).
    last_sent: Vec<u64>,
    /// Per plane, the corrections completions made so far (ns): a read booked behind another
    /// moves with the corrections made to its planes after it was booked.
    drift: Vec<i64>,
    /// Per plane, the ids of its reads in flight in booking order (their predictions are in
    /// `inflight`). One overdue at the front means the plane is stuck on work the books missed.
    queued: Vec<VecDeque<u64>>,
    /// Reads in flight: id -> (predicted completion, its planes with their drift then).
    inflight: HashMap<u64, (u64, Vec<(u32, i64)>)>,
}

/// MittSSD from its own books: refuse a read whose predicted latency misses the deadline.
#[derive(Debug, Clone)]
pub struct MittSsdBooks {
    /// Refuse above this predicted latency, ns.
    pub deadline_ns: u64,
    profile: SsdProfile,
    books: Vec<Books>,
    /// How late the last late reads came back, ns (up to [`LATENESS_KEPT`]).
    lateness: VecDeque<u64>,
}

impl MittSsdBooks {
    /// Refuse reads predicted (from `profile` and the books) to take longer than `deadline_ns`.
    pub fn new(deadline_ns: u64, profile: SsdProfile) -> Self {
        MittSsdBooks {
            deadline_ns,
            profile: SsdProfile {
                planes: profile.planes.max(1),
                channels: profile.channels.max(1),
                ..profile
            },
            books: Vec::new(),
            lateness: VecDeque::new(),
        }
    }

    fn books(&mut self, replica: usize) -> &mut Books {
        if self.books.len() <= replica {
            let p = self.profile.planes as usize;
            let fresh = Books {
                plane_free: vec![0; p],
                channels: vec![Calendar::default(); self.profile.channels as usize],
                last_sent: vec![0; p],
                drift: vec![0; p],
                queued: vec![VecDeque::new(); p],
                ..Books::default()
            };
            self.books.resize(replica + 1, fresh);
        }
        &mut self.books[replica]
    }

    /// Book the commands `replica`'s FTL issued, in order.
    pub fn book(&mut self, replica: usize, commands: &[NandCommand]) {
        let pr = self.profile;
        let b = self.books(replica);
        for c in commands {
            let p = c.plane as usize % b.plane_free.len();
            let ch = p % b.channels.len();
            match c.op {
                NandOp::Read => {
                    let sensed = b.plane_free[p].max(c.issued_ns) + pr.read_ns;
                    b.plane_free[p] = sensed;
                    b.last_sent[p] = b.channels[ch].reserve(sensed, pr.transfer_ns);
                }
                NandOp::Program { upper } => {
                    let received = b.channels[ch].reserve(c.issued_ns, pr.transfer_ns);
                    let program = if upper {
                        pr.program_upper_ns
                    } else {
                        pr.program_lower_ns
                    };
                    b.plane_free[p] = b.plane_free[p].max(received) + program;
                }
                NandOp::Collect { moves, via_channel } => {
                    let per_move = pr.read_ns + (pr.program_lower_ns + pr.program_upper_ns) / 2;
                    let start = b.plane_free[p].max(c.issued_ns);
                    b.plane_free[p] = start + moves as u64 * per_move + pr.erase_ns;
                    if via_channel {
                        b.channels[ch].reserve(start, 2 * moves as u64 * pr.transfer_ns);
                    }
                }
            }
        }
    }

    /// How much longer a plane whose read is `overdue_ns` late stays stuck: the mean of what
    /// late reads ran past that; with none that late, as long again.
    fn remaining_ns(&self, overdue_ns: u64) -> u64 {
        let (mut sum, mut n) = (0u64, 0u64);
        for &l in self.lateness.iter().filter(|&&l| l > overdue_ns) {
            sum += l - overdue_ns;
            n += 1;
        }
        sum.checked_div(n).unwrap_or(overdue_ns.max(self.profile.read_ns))
    }

    /// The predicted latency of the read `io` describes, ns (0 without the page map): each
    /// page is sensed once its plane is free (or unstuck), then sent once its channel is.
    pub fn predict_ns(&mut self, io: &IoView) -> u64 {
        let Some(planes) = io.planes else { return 0 };
        let pr = self.profile;
        let now = io.now_ns;
        let start = now + pr.controller_ns;
        let mut done = start + DRAM_NS;
        let replica = io.replica as usize;
        self.books(replica);
        // Pages of one read on one plane or channel queue behind each other.
        let mut plane_free: Vec<(usize, u64)> = Vec::new();
        let mut channel_free: Vec<(usize, u64)> = Vec::new();
        for &p in planes {
            let b = &self.books[replica];
            let p = p as usize % b.plane_free.len();
            let ch = p % b.channels.len();
            // A read of this plane overdue (its prediction corrected as its queue was): the
            // plane is busy with work the books missed, for as long again as late reads ran
            // past that.
            let due = b.queued[p]
                .front()
                .and_then(|id| b.inflight.get(id))
                .map(|(due, planes)| {
                    let then = planes
                        .iter()
                        .find(|x| x.0 as usize % b.plane_free.len() == p)
                        .map_or(0, |x| x.1);
                    (*due as i64 + b.drift[p] - then).max(0) as u64
                });
            let stuck = match due {
                Some(due) if due < now => now + self.remaining_ns(now - due),
                _ => 0,
            };
            let pf = plane_free.iter().find(|x| x.0 == p).map_or(b.plane_free[p], |x| x.1);
            let cf = channel_free.iter().find(|x| x.0 == ch).map_or(0, |x| x.1);
            let sensed = start.max(pf).max(stuck) + pr.read_ns;
            let sent = b.channels[ch].probe(sensed.max(cf), pr.transfer_ns) + pr.transfer_ns;
            plane_free.retain(|x| x.0 != p);
            plane_free.push((p, sensed));
            channel_free.retain(|x| x.0 != ch);
            channel_free.push((ch, sent));
            done = done.max(sent);
        }
        done - now
    }
}

impl Admission for MittSsdBooks {
    fn name(&self) -> String {
        "mittssd-books".into()
    }
    fn needs(&self) -> Needs {
        Needs {
            layout: true,
            ..Needs::default()
        }
    }
    fn admit(&mut self, io: &IoView) -> bool {
        self.predict_ns(io) <= io.deadline_ns.unwrap_or(self.deadline_ns)
    }
    fn slowness(&mut self, io: &IoView) -> f32 {
        self.predict_ns(io) as f32
    }
    fn issued(&mut self, replica: usize, commands: &[NandCommand]) {
        self.book(replica, commands);
    }
    /// A read entered the drive: its commands were booked (they come first); what they
    /// predict is kept, to judge it by when it completes.
    fn started(&mut self, io: &Started) {
        if io.write {
            return; // its programs come as commands when the drive issues them
        }
        let ctrl = self.profile.controller_ns;
        let b = self.books(io.replica);
        let n = b.plane_free.len();
        let done = io.planes.iter().map(|&p| b.last_sent[p as usize % n]).max();
        let done = done.unwrap_or(io.now_ns + ctrl + DRAM_NS);
        let planes: Vec<(u32, i64)> = io.planes.iter().map(|&p| (p, b.drift[p as usize % n])).collect();
        for &(p, _) in &planes {
            b.queued[p as usize % n].push_back(io.id);
        }
        b.inflight.insert(io.id, (done, planes));
    }
    fn finished(&mut self, replica: usize, id: u64, done_ns: u64) {
        let Some((predicted, planes)) = self.books(replica).inflight.remove(&id) else {
            return;
        };
        let pr = self.profile;
        let b = &mut self.books[replica];
        let n = b.plane_free.len();
        // Late against the prediction as corrected since it was booked (what completions ahead
        // of it on its planes already moved is not counted twice).
        let moved = planes
            .iter()
            .map(|&(p, then)| b.drift[p as usize % n] - then)
            .max()
            .unwrap_or(0);
        let late = done_ns as i64 - (predicted as i64 + moved);
        // Late: work the books missed kept one of its planes busy until it was read; early:
        // the books were pessimistic. Either way what is booked behind it on its planes moves
        // by as much (not before the answer itself). Its channel, shared with other planes,
        // is left as booked: this plane's stall did not hold it up.
        for &(p, _) in &planes {
            let p = p as usize % n;
            if let Some(k) = b.queued[p].iter().position(|&q| q == id) {
                b.queued[p].remove(k);
            }
            b.drift[p] += late;
            let shifted = (b.plane_free[p] as i64 + late).max(0) as u64;
            b.plane_free[p] = shifted.max(done_ns.saturating_sub(pr.transfer_ns));
        }
        if late > pr.read_ns as i64 {
            if self.lateness.len() == LATENESS_KEPT {
                self.lateness.pop_front();
            }
            self.lateness.push_back(late as u64);
        }
    }
}
