//! RAIN in the drive: TinyTailFlash's parity, written (`Designs::rain`).
//!
//! A stripe holds up to `g - 1` data pages on distinct planes of a parity group (`g` =
//! `parity_group` planes) and one parity page on another plane of the group; a read of a plane
//! under GC is rebuilt from the stripe's other pages. Parity costs capacity (`(g - 1) / g` of the
//! drive holds data, [`SsdConfig::logical_pages_with`]) and a program per stripe.
//!
//! Why superblocks: a stripe's parity covers every page it was computed over, dead or alive. If
//! a plane erased one block on its own (the per-plane GC of the other designs), every stripe with
//! a dead page in that block would lose a member while still protecting live pages on other
//! planes: it would need its parity rewritten (a program per erased page, doubling the writes),
//! or it would keep its parity page until its last member died (H(g-1)/(g-1) parity pages per
//! live page under random overwrites: 0.37 for g = 8, past the 1/7 the capacity leaves). So, as
//! production drives do, a group's planes write into superblocks (the same block index on every
//! plane of the group) and GC collects a whole superblock: its live pages move into new stripes
//! of the open superblock and its stripes die with it. With rotating GC the collection runs one
//! plane at a time (TinyTailFlash's "at most one GC per plane group"), so while a plane collects
//! the other pages of any stripe can be read. A stripe still being filled keeps its running
//! parity in the capacitor-backed RAM.
//!
//! The moved pages' contents cross the channel to the parity engine even with copyback (the
//! new stripes' parity needs them); copyback saves the transfer back.

use super::{Ssd, SsdConfig, UNMAPPED};
use std::collections::VecDeque;

/// Owner of a parity page (logical pages are below `MAX_PAGES`).
pub(super) const PARITY: u32 = u32::MAX - 1;
const NO_STRIPE: u32 = u32::MAX;

/// The drive's stripes and superblocks.
#[derive(Debug, Clone)]
pub(super) struct Rain {
    /// Planes per parity group.
    g: usize,
    groups: Vec<Group>,
    /// Per physical page (plane, block, page in order): the stripe it was written into
    /// (data, dead or alive, or parity); `NO_STRIPE` when erased or padding.
    stripe_of: Vec<u32>,
    /// Per stripe: its planes (bit k: the group's k-th plane).
    masks: Vec<u64>,
    /// Stripe ids per superblock: a stripe has at least two pages, plus the open one.
    per_sb: usize,
    /// The group the next host page goes to (round robin).
    next_group: usize,
}

/// One parity group's superblocks.
#[derive(Debug, Clone)]
struct Group {
    /// Erased superblocks, oldest first.
    free: VecDeque<u32>,
    /// The superblock being written.
    active: u32,
    /// Pages written into it per plane of the group (the planes' own counts, kept here
    /// together: placing a page reads them all, and the planes lie far apart in memory).
    fill: Vec<u32>,
    /// The open stripe (its parity is still in RAM) and its data pages so far.
    open: u32,
    open_data: usize,
    /// The next stripe id's slot in the active superblock.
    next_slot: usize,
    /// Rotating GC: the share under way (its plane, not before when), and the shares after
    /// it (plane, duration, channel transfers), each scheduled once the one before has ended.
    head: Option<(usize, u64)>,
    chain: VecDeque<(usize, u64, u64)>,
}

/// Where a page went: its plane, when its program ends, and the parity plane if its stripe
/// closed with it.
struct Placed {
    plane: usize,
    end: u64,
    parity: Option<usize>,
}

impl Rain {
    pub(super) fn new(cfg: &SsdConfig) -> Rain {
        let g = cfg.parity_group;
        let blocks = cfg.blocks_per_plane;
        let per_sb = cfg.pages_per_block * g / 2 + 1;
        let groups = (0..cfg.planes() / g)
            .map(|gi| Group {
                free: (1..blocks as u32).collect(),
                active: 0,
                fill: vec![0; g],
                open: (gi * blocks * per_sb) as u32,
                open_data: 0,
                next_slot: 1,
                head: None,
                chain: VecDeque::new(),
            })
            .collect::<Vec<_>>();
        Rain {
            g,
            stripe_of: vec![NO_STRIPE; cfg.planes() * blocks * cfg.pages_per_block],
            masks: vec![0; groups.len() * blocks * per_sb],
            per_sb,
            next_group: 0,
            groups,
        }
    }

    fn stripe_id(&self, gi: usize, block: u32, slot: usize, blocks: usize) -> u32 {
        ((gi * blocks + block as usize) * self.per_sb + slot) as u32
    }
}

impl Ssd {
    fn rain_ref(&self) -> &Rain {
        self.rain.as_deref().expect("RAIN is on (Designs::rain)")
    }

    fn rain_mut(&mut self) -> &mut Rain {
        self.rain.as_deref_mut().expect("RAIN is on (Designs::rain)")
    }

    /// Index of a physical page in `Rain::stripe_of`.
    fn page_index(&self, plane: usize, block: u32, page: u32) -> usize {
        (plane * self.cfg.blocks_per_plane + block as usize) * self.cfg.pages_per_block + page as usize
    }

    /// The planes of group `gi` (bit k: its k-th plane) with room in its active superblock
    /// and not yet in its open stripe.
    fn rain_candidates(&self, gi: usize) -> u64 {
        let r = self.rain_ref();
        let grp = &r.groups[gi];
        let mask = r.masks[grp.open as usize];
        (0..r.g)
            .filter(|&k| mask & (1 << k) == 0 && (grp.fill[k] as usize) < self.cfg.pages_per_block)
            .fold(0, |m, k| m | 1 << k)
    }

    /// Of the candidate planes `cands` (a mask), the plane to write: `prefer` if it is one;
    /// for a tolerant flush one not collecting garbage; the least filled (the planes of a
    /// superblock fill evenly).
    fn rain_choose(&mut self, gi: usize, cands: u64, prefer: Option<usize>, now_ns: u64, timed: bool) -> usize {
        let g = self.rain_ref().g;
        if let Some(p) = prefer.filter(|p| p / g == gi && cands & (1 << (p % g)) != 0) {
            return p;
        }
        let in_cands = move |k: &usize| cands & (1 << k) != 0;
        let tolerant = timed && self.designs.tolerant_flush;
        if tolerant {
            (0..g).filter(in_cands).for_each(|k| self.settle(gi * g + k, now_ns));
        }
        let grp = &self.rain_ref().groups[gi];
        let turn = grp.next_slot % g;
        // Ties go round the group from a plane that moves with each stripe, so parity (the
        // last page of a stripe) rotates over the planes as in RAID-5.
        let key = |k: &usize| (grp.fill[*k], if *k >= turn { k - turn } else { k + g - turn });
        let free = |k: &usize| self.planes[gi * g + k].clock.gc_until_ns <= now_ns;
        let best = match (0..g).filter(in_cands).filter(|k| tolerant && free(k)).min_by_key(key) {
            Some(k) => k,
            None => (0..g).filter(in_cands).min_by_key(key).expect("a candidate plane"),
        };
        gi * g + best
    }

    /// Program `owner` (a logical page or `PARITY`) into `plane`'s block of the active
    /// superblock as a member of `stripe`; returns when the program ends.
    fn rain_write(&mut self, plane: usize, owner: u32, stripe: u32, now_ns: u64, timed: bool) -> u64 {
        let gi = plane / self.rain_ref().g;
        let b = self.rain_ref().groups[gi].active;
        let ppb = self.cfg.pages_per_block;
        let p = &mut self.planes[plane];
        let pg = p.written[b as usize];
        p.written[b as usize] += 1;
        if owner != PARITY {
            p.valid[b as usize] += 1;
            self.set_map(owner, super::pack(plane, b, pg));
        }
        self.set_owner(plane, b as usize * ppb + pg as usize, owner);
        let idx = self.page_index(plane, b, pg);
        let r = self.rain_mut();
        r.stripe_of[idx] = stripe;
        r.masks[stripe as usize] |= 1 << (plane % r.g);
        r.groups[gi].fill[plane % r.g] += 1;
        self.stats.pages_programmed += 1;
        if timed {
            self.program_time(plane, pg, now_ns)
        } else {
            now_ns
        }
    }

    /// Place data page `lpn` in group `gi`'s open stripe (a new superblock first if the
    /// active one has no room for a stripe), closing the stripe when it is full or when only
    /// one plane is left for its parity.
    fn rain_place(&mut self, gi: usize, lpn: u32, now_ns: u64, timed: bool, prefer: Option<usize>) -> Placed {
        let mut cands = self.rain_candidates(gi);
        if cands.count_ones() < 2 {
            // A stripe closes while a plane has room for its parity, so the open one is empty.
            debug_assert_eq!(self.rain_ref().groups[gi].open_data, 0);
            self.rain_new_superblock(gi);
            cands = self.rain_candidates(gi);
        }
        let plane = self.rain_choose(gi, cands, prefer, now_ns, timed);
        if timed {
            self.settle(plane, now_ns);
        }
        if timed && self.planes[plane].clock.gc_until_ns > now_ns {
            self.stats.flush_into_gc += 1;
        }
        let stripe = self.rain_ref().groups[gi].open;
        let mut end = self.rain_write(plane, lpn, stripe, now_ns, timed);
        let r = self.rain_mut();
        r.groups[gi].open_data += 1;
        let mut parity = None;
        if r.groups[gi].open_data == r.g - 1 || cands.count_ones() <= 2 {
            let (pp, pend) = self.rain_close(gi, now_ns, timed);
            parity = Some(pp);
            end = end.max(pend);
        }
        Placed { plane, end, parity }
    }

    /// Program the open stripe's parity on a plane of the group it does not use and open the
    /// next stripe; returns the parity's plane and when its program ends.
    fn rain_close(&mut self, gi: usize, now_ns: u64, timed: bool) -> (usize, u64) {
        let cands = self.rain_candidates(gi);
        let plane = self.rain_choose(gi, cands, None, now_ns, timed);
        let stripe = self.rain_ref().groups[gi].open;
        let end = self.rain_write(plane, PARITY, stripe, now_ns, timed);
        self.stats.parity_pages += 1;
        self.rain_open_stripe(gi);
        (plane, end)
    }

    /// Open group `gi`'s next stripe, in the next slot of its active superblock.
    fn rain_open_stripe(&mut self, gi: usize) {
        let blocks = self.cfg.blocks_per_plane;
        let r = self.rain_mut();
        let grp = &r.groups[gi];
        let id = r.stripe_id(gi, grp.active, grp.next_slot, blocks);
        r.masks[id as usize] = 0;
        let grp = &mut r.groups[gi];
        (grp.open, grp.open_data) = (id, 0);
        grp.next_slot += 1;
    }

    /// Close group `gi`'s active superblock (pages its planes did not fill stay unwritten) and
    /// open the oldest erased one.
    fn rain_new_superblock(&mut self, gi: usize) {
        let (g, ppb) = (self.rain_ref().g, self.cfg.pages_per_block as u32);
        let old = self.rain_ref().groups[gi].active as usize;
        for plane in gi * g..(gi + 1) * g {
            let w = &mut self.planes[plane].written[old];
            self.stats.padded_pages += u64::from(ppb - *w);
            *w = ppb;
        }
        let r = self.rain_mut();
        let b = r.groups[gi]
            .free
            .pop_front()
            .expect("a free superblock (GC keeps a reserve)");
        let grp = &mut r.groups[gi];
        (grp.active, grp.next_slot) = (b, 0);
        grp.fill.fill(0);
        self.rain_open_stripe(gi);
        for plane in gi * g..(gi + 1) * g {
            self.planes[plane].active = b;
        }
    }

    /// Write a host page (RAIN's `program_page`): groups in turn; collect a superblock when the
    /// group runs low.
    pub(super) fn rain_program_page(&mut self, lpn: u32, now_ns: u64, timed: bool) -> u64 {
        self.invalidate(lpn);
        let r = self.rain_mut();
        let gi = r.next_group;
        r.next_group = (gi + 1) % r.groups.len();
        let end = self.rain_place(gi, lpn, now_ns, timed, None).end;
        if self.rain_ref().groups[gi].free.len() < self.cfg.gc_threshold_blocks {
            self.rain_collect(gi, end, timed);
        }
        end
    }

    /// Collect the superblock of group `gi` with the fewest live pages: move them into new
    /// stripes (copyback when they stay on their plane), erase it on every plane. Timed, each
    /// plane's share (its reads, its programs, its erase) is scheduled: one plane after the
    /// other under rotating GC, all at once otherwise. Rotating GC also waits while another
    /// collection of the group is under way; down to its last free superblock, the group
    /// collects at once on every plane.
    fn rain_collect(&mut self, gi: usize, now_ns: u64, timed: bool) {
        let (g, ppb) = (self.rain_ref().g, self.cfg.pages_per_block);
        let planes: Vec<usize> = (gi * g..(gi + 1) * g).collect();
        // Out of space, the collection cannot wait nor take turns.
        let rotating = self.designs.rotating_gc && self.rain_ref().groups[gi].free.len() > 1;
        if timed && rotating {
            // Not settled to `now_ns`: it is when the triggering program ends, possibly well
            // after the requests still to come on these planes.
            let busy = self.rain_ref().groups[gi].head.is_some()
                || planes.iter().any(|&p| {
                    let c = &self.planes[p].clock;
                    c.gc_until_ns > now_ns || !c.scheduled.is_empty()
                });
            if busy {
                return;
            }
        }
        let active = self.rain_ref().groups[gi].active;
        let victim = (0..self.cfg.blocks_per_plane as u32)
            .filter(|&b| {
                b != active
                    && planes
                        .iter()
                        .all(|&p| self.planes[p].written[b as usize] as usize == ppb)
            })
            .min_by_key(|&b| planes.iter().map(|&p| self.planes[p].valid[b as usize]).sum::<u32>());
        let Some(victim) = victim else { return };
        let v = victim as usize;
        // Per plane of the group: page reads, programs, channel transfers.
        let (mut reads, mut progs, mut xfers) = (vec![0u64; g], vec![0u64; g], vec![0u64; g]);
        let mut moved = 0;
        for (k, &plane) in planes.iter().enumerate() {
            let lpns: Vec<u32> = (0..ppb)
                .map(|pg| self.owner(plane, v * ppb + pg))
                .filter(|&o| o != UNMAPPED && o != PARITY)
                .collect();
            for lpn in lpns {
                self.invalidate(lpn);
                let placed = self.rain_place(gi, lpn, now_ns, false, Some(plane));
                let dst = placed.plane % g;
                reads[k] += 1;
                progs[dst] += 1;
                xfers[k] += 1; // out to the parity engine
                if placed.plane != plane || !self.designs.copyback {
                    xfers[dst] += 1;
                }
                if let Some(pp) = placed.parity {
                    progs[pp % g] += 1;
                    xfers[pp % g] += 1;
                }
                moved += 1;
            }
        }
        for &plane in &planes {
            let p = &mut self.planes[plane];
            debug_assert_eq!(p.valid[v], 0);
            p.written[v] = 0;
            for i in v * ppb..(v + 1) * ppb {
                self.set_owner(plane, i, UNMAPPED);
            }
            let first = self.page_index(plane, victim, 0);
            self.rain_mut().stripe_of[first..first + ppb].fill(NO_STRIPE);
        }
        self.rain_mut().groups[gi].free.push_back(victim);
        self.stats.gcs += 1;
        self.stats.gc_pages_moved += moved;
        if !timed || self.designs.free_gc {
            return;
        }
        let c = &self.cfg;
        let prog = (c.program_lower_ns + c.program_upper_ns) / 2;
        let shares: Vec<(usize, u64, u64)> = planes
            .iter()
            .enumerate()
            .map(|(k, &plane)| (plane, reads[k] * c.read_ns + progs[k] * prog + c.erase_ns, xfers[k]))
            .collect();
        if rotating {
            // One plane after the other: each share starts when the one before has ended
            // (`rain_advance`), however late host requests made it.
            let (first, rest) = shares.split_first().expect("a group has planes");
            self.rain_schedule(*first, now_ns);
            let grp = &mut self.rain_mut().groups[gi];
            grp.head = Some((first.0, now_ns));
            grp.chain = rest.iter().copied().collect();
        } else {
            shares.into_iter().for_each(|share| self.rain_schedule(share, now_ns));
        }
    }

    /// Schedule a GC share (plane, duration, channel transfers) not before `start_ns`; its
    /// transfers interleave with its reads and programs, one page at a time.
    fn rain_schedule(&mut self, (plane, dur, xfers): (usize, u64, u64), start_ns: u64) {
        let (ch, xfer) = (plane % self.cfg.channels, self.cfg.transfer_ns());
        for i in 0..xfers {
            self.channels[ch].reserve(start_ns + i * dur / xfers, xfer);
        }
        self.planes[plane].clock.schedule(start_ns, dur);
    }

    /// Rotating GC: at `now_ns`, start each group's next share once the one under way has
    /// ended (it started when its plane was free at its time, so it ends at its plane's
    /// GC-until).
    pub(super) fn rain_advance(&mut self, now_ns: u64) {
        for gi in 0..self.rain_ref().groups.len() {
            while let Some((plane, start)) = self.rain_ref().groups[gi].head {
                if start > now_ns {
                    break;
                }
                self.settle(plane, now_ns);
                let end = self.planes[plane].clock.gc_until_ns;
                match self.rain_mut().groups[gi].chain.pop_front() {
                    Some(next) => {
                        self.rain_schedule(next, end);
                        self.rain_mut().groups[gi].head = Some((next.0, end));
                    }
                    None => self.rain_mut().groups[gi].head = None,
                }
            }
        }
    }

    /// Rebuild a read of (`plane`, `block`, `page`), whose plane collects garbage, from the
    /// other pages of its stripe, if none of their planes collects too. A stripe still open has
    /// its running parity in RAM (a lone page is its own parity).
    pub(super) fn rain_rebuild(&mut self, plane: usize, block: u32, page: u32, now_ns: u64) -> Option<u64> {
        let idx = self.page_index(plane, block, page);
        let r = self.rain.as_deref()?;
        let stripe = r.stripe_of[idx];
        let g = r.g;
        let others = r.masks[stripe as usize] & !(1 << (plane % g));
        let members: Vec<usize> = (0..g)
            .filter(|k| others & (1 << k) != 0)
            .map(|k| plane / g * g + k)
            .collect();
        members.iter().for_each(|&m| self.settle(m, now_ns));
        if members.iter().any(|&m| self.planes[m].clock.gc_until_ns > now_ns) {
            return None;
        }
        Some(
            members
                .iter()
                .map(|&m| self.nand_read(m, now_ns))
                .max()
                .unwrap_or(now_ns)
                + 1_000,
        )
    }

    /// RAIN's bookkeeping: every written page belongs to a stripe with at most one page per
    /// plane and a page on each of its planes (none lost); every closed stripe has exactly one
    /// parity page and the open one none; erased superblocks are unwritten on every plane of their group.
    pub(super) fn rain_check(&self) -> Result<(), String> {
        let r = self.rain_ref();
        let ppb = self.cfg.pages_per_block;
        let mut seen = vec![0u64; r.masks.len()];
        let mut parities = vec![0u32; r.masks.len()];
        for (pi, p) in self.planes.iter().enumerate() {
            for b in 0..self.cfg.blocks_per_plane {
                for pg in 0..p.written[b] as usize {
                    let s = r.stripe_of[self.page_index(pi, b as u32, pg as u32)];
                    if s == NO_STRIPE {
                        if self.owner(pi, b * ppb + pg) != UNMAPPED {
                            return Err(format!("plane {pi} block {b} page {pg}: holds a page but no stripe"));
                        }
                        continue; // padding
                    }
                    let sb = (pi / r.g * self.cfg.blocks_per_plane + b) * r.per_sb;
                    if !(sb..sb + r.per_sb).contains(&(s as usize)) {
                        return Err(format!(
                            "stripe {s}: on block {b} of plane {pi}, outside its superblock's ids"
                        ));
                    }
                    let bit = 1 << (pi % r.g);
                    if seen[s as usize] & bit != 0 {
                        return Err(format!("stripe {s}: two pages on plane {pi}"));
                    }
                    seen[s as usize] |= bit;
                    if r.masks[s as usize] & bit == 0 {
                        return Err(format!("stripe {s}: plane {pi} holds a page but is not in its mask"));
                    }
                    parities[s as usize] += u32::from(self.owner(pi, b * ppb + pg) == PARITY);
                }
            }
        }
        for s in (0..r.masks.len()).filter(|&s| seen[s] != 0) {
            // The invariant superblock GC keeps: no stripe has lost a page.
            if seen[s] != r.masks[s] {
                return Err(format!(
                    "stripe {s}: pages on planes {:#b} of {:#b}",
                    seen[s], r.masks[s]
                ));
            }
            let gi = s / r.per_sb / self.cfg.blocks_per_plane;
            let want = u32::from(s as u32 != r.groups[gi].open);
            if parities[s] != want {
                return Err(format!("stripe {s}: {} parity pages (want {want})", parities[s]));
            }
        }
        for (gi, grp) in r.groups.iter().enumerate() {
            let open_pages = seen[grp.open as usize].count_ones() as usize;
            if open_pages != grp.open_data {
                return Err(format!(
                    "group {gi}: open stripe has {open_pages} pages, {} counted",
                    grp.open_data
                ));
            }
            for (k, &f) in grp.fill.iter().enumerate() {
                if self.planes[gi * r.g + k].written[grp.active as usize] != f {
                    return Err(format!("group {gi}: plane {k}'s fill {f} is not its block's"));
                }
            }
            for &b in &grp.free {
                if (gi * r.g..(gi + 1) * r.g).any(|p| self.planes[p].written[b as usize] != 0) {
                    return Err(format!("group {gi}: free superblock {b} is written"));
                }
            }
        }
        Ok(())
    }
}
