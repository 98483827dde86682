//! LEAP (Maruf and Chowdhury, "Effectively Prefetching Remote Memory with Leap", ATC 2020) as
//! a page-cache prefetcher, the way KML's evaluation ran it as a baseline: integrated with the
//! local page cache, choosing which pages to fetch, backwards too (KML's thesis, section 5: it
//! won readreverse for that reason and lost readseq by 24-36%).
//!
//! Per file, the algorithm of LEAP's kernel release (`mm/swap_state.c`):
//! - every access the kernel sees logs the delta from the previous one in a ring of
//!   [`HISTORY`] entries;
//! - on a miss, the trend is the Boyer-Moore majority of the newest `HISTORY / 4` deltas,
//!   doubling the span up to `HISTORY` until a delta holds more than half of it;
//! - the window is the prefetched pages hit since the last miss plus 2, rounded up to a power
//!   of two (at least 4), capped, and never below half the previous window;
//! - with a trend, that many pages along the majority delta from the missing page; without, the
//!   aligned cluster around it. Linux's own readahead is off for the file.
//!
//! The prefetched pages carry the page cache's readahead marker, which a lookup the kernel sees
//! clears: that is LEAP's hit count (`TestClearPageReadahead`). Fault-around does not map a
//! page with the marker, so a scan through a mapping faults on every prefetched page. The
//! unmarked variant ([`LeapState::unmarked`], LEAP at its best on a page cache) keeps the
//! prefetched pages in a set of its own instead, so fault-around maps them; a hit is then a
//! page of the set that a fault or read reaches.

/// Entries in the access history (LEAP's `init_swap_trend(32)`).
pub const HISTORY: usize = 32;

/// Prefetched pages not used yet, at most a few windows' worth: the oldest are forgotten first
/// (a page nobody used for that long was evicted or never wanted), so the window being used
/// keeps its hits.
#[derive(Debug, Clone, Default)]
struct Pending {
    pages: std::collections::HashSet<u64>,
    /// Insertion order; may still name pages used since (skipped when they come out).
    order: std::collections::VecDeque<u64>,
}

impl Pending {
    fn insert(&mut self, index: u64, cap: usize) -> bool {
        if !self.pages.insert(index) {
            return false;
        }
        self.order.push_back(index);
        while self.order.len() > cap {
            if let Some(old) = self.order.pop_front() {
                self.pages.remove(&old);
            }
        }
        true
    }
}

/// One file's LEAP state.
#[derive(Debug, Clone)]
pub struct LeapState {
    /// Deltas, a ring; unfilled entries are 0 (LEAP's history is `kzalloc`ed).
    deltas: [i64; HISTORY],
    /// Next slot.
    head: usize,
    /// The last index logged.
    last: Option<u64>,
    /// Prefetched pages hit since the last window was sized.
    hits: u64,
    /// The last window, pages.
    last_pages: u64,
    /// The largest window, pages.
    max_pages: u64,
    /// Unmarked variant: the prefetched pages not used yet (`None`: the marker counts hits).
    pending: Option<Pending>,
}

impl LeapState {
    /// A fresh state with windows of at most `max_pages` pages (at least 1).
    pub fn new(max_pages: u64) -> LeapState {
        LeapState {
            deltas: [0; HISTORY],
            head: 0,
            last: None,
            hits: 0,
            last_pages: 0,
            max_pages: max_pages.max(1),
            pending: None,
        }
    }

    /// The unmarked variant: prefetched pages carry no marker (fault-around maps them) and
    /// LEAP remembers them itself, at most a few windows' worth.
    pub fn unmarked(max_pages: u64) -> LeapState {
        LeapState {
            pending: Some(Pending::default()),
            ..LeapState::new(max_pages)
        }
    }

    /// Whether prefetched pages carry the page cache's readahead marker.
    pub fn marks_pages(&self) -> bool {
        self.pending.is_none()
    }

    /// Unmarked variant: `index` was prefetched; a later use of it is a hit. Returns whether
    /// it was not already waiting for its use (a page to read, not one read already).
    pub fn prefetched(&mut self, index: u64) -> bool {
        let cap = (4 * self.max_pages) as usize;
        match &mut self.pending {
            Some(p) => p.insert(index, cap),
            None => true,
        }
    }

    /// Unmarked variant: whether `index` is a prefetched page used for the first time.
    pub fn take(&mut self, index: u64) -> bool {
        self.pending.as_mut().is_some_and(|p| p.pages.remove(&index))
    }

    /// An access the kernel saw (`log_swap_trend`): the first one logs delta 0.
    pub fn log(&mut self, index: u64) {
        let delta = self.last.map_or(0, |prev| index as i64 - prev as i64);
        self.deltas[self.head] = delta;
        self.head = (self.head + 1) % HISTORY;
        self.last = Some(index);
    }

    /// A prefetched page was used.
    pub fn hit(&mut self) {
        self.hits += 1;
    }

    /// The majority delta of the newest `size` entries, if it holds more than half of them
    /// (`find_trend_in_region`: Boyer-Moore voting, then a count).
    fn majority(&self, size: usize) -> Option<i64> {
        let newest = |k: usize| self.deltas[(self.head + HISTORY - 1 - k) % HISTORY];
        let (mut cand, mut count) = (newest(0), 1usize);
        for k in 1..size {
            if newest(k) == cand {
                count += 1;
            } else {
                count -= 1;
                if count == 0 {
                    cand = newest(k);
                    count = 1;
                }
            }
        }
        let n = (0..size).filter(|&k| newest(k) == cand).count();
        (n > size / 2).then_some(cand)
    }

    /// LEAP's trend (`find_trend`): spans of `HISTORY / 4`, doubling up to `HISTORY`.
    pub fn trend(&self) -> Option<i64> {
        let mut size = HISTORY / 4;
        while size <= HISTORY {
            if let Some(d) = self.majority(size) {
                return Some(d);
            }
            size *= 2;
        }
        None
    }

    /// The window for this miss, pages (`swapin_nr_pages` in LEAP's mode); resets the hits.
    pub fn window(&mut self) -> u64 {
        if self.max_pages <= 1 {
            return 1;
        }
        let wanted = std::mem::take(&mut self.hits) + 2;
        let mut pages = 4u64;
        while pages < wanted {
            pages <<= 1;
        }
        pages = pages.min(self.max_pages);
        // Don't shrink too fast.
        pages = pages.max(self.last_pages / 2);
        self.last_pages = pages;
        pages
    }

    /// The pages to read for a miss at `index` of a file of `file_pages` pages: sized by
    /// [`window`](Self::window), along [`trend`](Self::trend) or the aligned cluster. The
    /// missing page is always first.
    pub fn prefetch(&mut self, index: u64, file_pages: u64) -> Vec<u64> {
        let pages = self.window();
        let mut out = vec![index];
        match self.trend() {
            Some(delta) if delta != 0 => {
                let mut at = index as i64;
                for _ in 1..pages {
                    at += delta;
                    if at < 0 || at as u64 >= file_pages {
                        break;
                    }
                    out.push(at as u64);
                }
            }
            // No trend (or a trend of repeats): the aligned cluster around the page.
            _ => {
                let size = pages.next_power_of_two();
                let start = index & !(size - 1);
                out.extend((start..(start + size).min(file_pages)).filter(|&i| i != index));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trends_need_a_majority_in_the_newest_span() {
        let mut l = LeapState::new(256);
        for i in 0..40u64 {
            l.log(1000 - i);
        }
        assert_eq!(l.trend(), Some(-1), "a reverse scan");
        let mut l = LeapState::new(256);
        let mut rng = iolearn_ml::Rng::new(5);
        for _ in 0..40 {
            l.log(rng.below(1_000_000) as u64);
        }
        assert_eq!(l.trend(), None, "random");
        // A stride that took over only the newest 8 accesses is found by the smallest span.
        let mut l = LeapState::new(256);
        for i in 0..24u64 {
            l.log(i * 7919 % 10007);
        }
        for i in 0..8u64 {
            l.log(50_000 + 4 * i);
        }
        assert_eq!(l.trend(), Some(4));
    }

    #[test]
    fn the_window_grows_with_hits_and_shrinks_by_halves() {
        let mut l = LeapState::new(64);
        assert_eq!(l.window(), 4, "no hits: the smallest window");
        for _ in 0..6 {
            l.hit();
        }
        assert_eq!(l.window(), 8, "6 + 2 rounded up");
        for _ in 0..100 {
            l.hit();
        }
        assert_eq!(l.window(), 64, "capped");
        assert_eq!(l.window(), 32, "no hits: half, not 4");
        assert_eq!(l.window(), 16);
        assert_eq!(LeapState::new(1).window(), 1);
    }

    #[test]
    fn the_oldest_prefetches_nobody_used_are_forgotten_first() {
        let mut l = LeapState::unmarked(2); // room for 8 pages
        for p in 0..8 {
            assert!(l.prefetched(p));
        }
        assert!(l.take(3), "used");
        assert!(l.prefetched(8) && l.prefetched(9));
        assert!(!l.take(0), "the oldest went first");
        assert!(l.take(9) && l.take(7), "the newest stay");
        assert!(!l.prefetched(8), "still waiting");
    }

    #[test]
    fn prefetch_follows_the_trend_backwards_or_reads_the_cluster() {
        let mut l = LeapState::new(256);
        for i in 0..32u64 {
            l.log(500 - i);
        }
        for _ in 0..6 {
            l.hit();
        }
        assert_eq!(l.prefetch(468, 1000), (461..=468).rev().collect::<Vec<_>>());
        // Near the file's start the trend stops at page 0.
        for _ in 0..30 {
            l.hit();
        }
        let p = l.prefetch(3, 1000);
        assert_eq!(p, vec![3, 2, 1, 0]);
        // Random: the aligned cluster, the missing page first.
        let mut r = LeapState::new(256);
        let mut rng = iolearn_ml::Rng::new(6);
        for _ in 0..32 {
            r.log(rng.below(1_000_000) as u64);
        }
        let p = r.prefetch(13, 1000);
        assert_eq!(p[0], 13);
        let mut rest = p[1..].to_vec();
        rest.sort_unstable();
        assert_eq!(rest, vec![12, 14, 15]);
    }
}
