//! Watching part of a window when the last one was all cache hits.
//!
//! The access programs run on every `read()` and every page fault, about 0.3 us each: on a
//! workload served from the page cache (a million reads a second on two cores) that is a
//! quarter of its time, spent watching a workload readahead cannot help (readahead only acts on
//! misses). After a window whose reads were nearly all hits, the tuner observes only the first
//! `share` of the next window (the programs are detached for the rest, so they cost nothing):
//! its counts are scaled to the whole window (for the metrics and the next window's choice),
//! and the window is not shown to the controllers: the value in force stays, the guardrail
//! and the learner pause (unwatched, a cached reader runs a quarter faster, so its progress
//! does not compare with a watched window's), the hysteresis keeps what it holds. A slice
//! that shows misses again brings the whole window back. The scaled counts are estimates, low
//! by the probes' own cost: while watched, a cached reader runs a fifth to a quarter slower,
//! and the slice sees that rate.
//!
//! A busy workload that misses (a random reader of a database: a few hundred thousand page
//! events a second, a twentieth of a core) is watched in slices too once the tuner has
//! nothing to do: `rest_after` whole windows in a row without a change, nothing held back,
//! and the guardrail idle ([`iolearn_policy::guard::Guarded::idle`]). Then it rests: only
//! one window in `rest_every` is watched whole and shown to the controllers (the guardrail's
//! checks and the learner go on, on those), the others are slices. A slice whose rate of
//! insertions or accesses is not within a factor of two of the last whole window's wakes
//! the tuner (every window whole until it is quiet again): a phase change that moves the
//! rates is seen within a window; one that keeps them (a random reader turning into a
//! strided one at the same rate) within `rest_every` windows.

/// When to sample, and how much.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplingConfig {
    /// Share of a sampled window that is observed (its start); 1: always observe everything.
    pub share: f64,
    /// A window is "all hits" when the pages it inserted are at most this share of the pages
    /// it accessed.
    pub max_insert_share: f64,
    /// ... and it accessed at least this many pages a second: below, the programs cost little
    /// and a slice would hold too few events to decide on.
    pub min_access_rate: f64,
    /// Whole windows in a row with nothing to do before the tuner rests.
    pub rest_after: u32,
    /// While resting, one window in this many is watched whole; 1: never rest.
    pub rest_every: u32,
}

impl Default for SamplingConfig {
    fn default() -> Self {
        SamplingConfig {
            share: 0.05,
            // One page in a thousand read from the device: at 100 us a miss and 1 us a hit,
            // a tenth of the time at most.
            max_insert_share: 0.001,
            // 20,000 events a second at 0.3 us is 0.6% of one core.
            min_access_rate: 20_000.0,
            // The guardrail being idle says its decision was judged; three windows show the
            // controller keeps asking for it.
            rest_after: 3,
            // 1 + 7 x 5% of the cost of watching every window: a sixth.
            rest_every: 8,
        }
    }
}

impl SamplingConfig {
    /// Check the fields (for the `--sample` option).
    pub fn check(&self) -> Result<(), String> {
        if !(self.share > 0.0 && self.share <= 1.0) {
            return Err(format!("--sample {}: a share of the window in (0, 1]", self.share));
        }
        if !(0.0..=1.0).contains(&self.max_insert_share) {
            return Err(format!(
                "sampling: max_insert_share {}: a share in [0, 1]",
                self.max_insert_share
            ));
        }
        if !(self.min_access_rate >= 0.0 && self.min_access_rate.is_finite()) {
            return Err(format!(
                "sampling: min_access_rate {}: pages a second, 0 or more",
                self.min_access_rate
            ));
        }
        if !(1..=1000).contains(&self.rest_after) {
            return Err(format!("sampling: rest_after {}: 1 to 1000 windows", self.rest_after));
        }
        if !(1..=1000).contains(&self.rest_every) {
            return Err(format!("--rest-every {}: 1 to 1000 windows", self.rest_every));
        }
        Ok(())
    }

    /// Whether the window after one that accessed `accessed` pages and inserted `inserted`
    /// (its counts scaled to the whole window) in `seconds` is sampled.
    pub fn sample_next(&self, accessed: u64, inserted: u64, seconds: f64) -> bool {
        self.share < 1.0
            && seconds > 0.0
            && accessed as f64 >= self.min_access_rate * seconds
            && inserted as f64 <= self.max_insert_share * accessed as f64
    }
}

/// Which windows the tuner watches whole: the state behind [`SamplingConfig`]'s rules.
#[derive(Debug, Clone, Default)]
pub struct Watch {
    /// Whole windows in a row with nothing to do.
    quiet: u32,
    /// Slices since the last whole window.
    slices: u32,
    /// Pages inserted and accessed a second in the last whole window.
    reference: Option<(f64, f64)>,
    /// How the window that just ended was to be watched.
    last: Next,
    /// Slices that showed the workload changed while the tuner rested.
    pub wakes: u64,
}

/// How the next window is watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Next {
    /// All of it, and shown to the controllers.
    #[default]
    Whole,
    /// A slice: the last window was all cache hits.
    Hits,
    /// A slice: the tuner rests.
    Rest,
}

/// The pages a slice counted and the pages the reference rate predicts for it are taken as
/// the same workload while within this factor (with [`WAKE_FLOOR`] added to both: a few
/// events do not wake).
const WAKE_FACTOR: f64 = 2.0;
const WAKE_FLOOR: f64 = 10.0;

impl Watch {
    /// How to watch the next window, after one that counted `added` and
    /// `accessed` pages (scaled to the window) in `seconds`, watched for `share` of it;
    /// `quiet`: the window was shown to the controllers and nothing changed, was held back or
    /// is being measured; `moved`: a slice in which the caller saw the workload change (its
    /// processes, or its progress fell: the guardrail's own checks run on whole windows only).
    #[allow(clippy::too_many_arguments)]
    pub fn sample_next(
        &mut self,
        cfg: &SamplingConfig,
        added: u64,
        accessed: u64,
        seconds: f64,
        share: f64,
        quiet: bool,
        moved: bool,
    ) -> Next {
        if cfg.share >= 1.0 || seconds <= 0.0 {
            return Next::Whole;
        }
        let (added_rate, accessed_rate) = (added as f64 / seconds, accessed as f64 / seconds);
        let all_hits = cfg.sample_next(accessed, added, seconds);
        let rest = if share >= 1.0 {
            self.slices = 0;
            self.quiet = if quiet { self.quiet.saturating_add(1) } else { 0 };
            self.reference = Some((added_rate, accessed_rate));
            self.quiet >= cfg.rest_after
        } else {
            self.slices = self.slices.saturating_add(1);
            let watched = seconds * share;
            let changed = moved
                || self.reference.is_some_and(|(a, r)| {
                    [(added_rate, a), (accessed_rate, r)].iter().any(|&(now, before)| {
                        let x = (now * watched + WAKE_FLOOR) / (before * watched + WAKE_FLOOR);
                        !(1.0 / WAKE_FACTOR..=WAKE_FACTOR).contains(&x)
                    })
                });
            if changed && self.last == Next::Rest {
                self.wakes += 1;
            }
            // A slice of a window of hits that shows misses again brings the whole window back.
            if changed || (self.last == Next::Hits && !all_hits) {
                self.quiet = 0;
            }
            self.quiet >= cfg.rest_after
        };
        let busy = (added_rate + accessed_rate) >= cfg.min_access_rate;
        let rest = rest && busy && self.slices.saturating_add(1) < cfg.rest_every;
        self.last = if all_hits {
            Next::Hits
        } else if rest {
            Next::Rest
        } else {
            Next::Whole
        };
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_busy_windows_of_hits_are_sampled() {
        let c = SamplingConfig::default();
        // 400,000 cached reads a second, a few misses: sampled.
        assert!(c.sample_next(400_000, 100, 1.0));
        // The same rate with 0.5% of the pages read from the device: watched whole.
        assert!(!c.sample_next(400_000, 2_000, 1.0));
        // Few reads: cheap to watch, too few to sample.
        assert!(!c.sample_next(10_000, 0, 1.0));
        // The rate is per second: 10,000 in half a second is 20,000 a second.
        assert!(c.sample_next(10_000, 0, 0.5));
        // No time measured, nothing decided.
        assert!(!c.sample_next(400_000, 0, 0.0));
        // A share of 1 turns sampling off.
        let off = SamplingConfig { share: 1.0, ..c };
        assert!(!off.sample_next(400_000, 0, 1.0));
    }

    #[test]
    fn shares_outside_zero_to_one_are_refused() {
        for bad in [0.0, -0.1, 1.5, f64::NAN] {
            let c = SamplingConfig {
                share: bad,
                ..Default::default()
            };
            assert!(c.check().unwrap_err().contains("--sample"), "{bad}");
        }
        assert!(SamplingConfig::default().check().is_ok());
        let bad_rate = SamplingConfig {
            min_access_rate: f64::NAN,
            ..Default::default()
        };
        assert!(bad_rate.check().unwrap_err().contains("min_access_rate"));
        let bad_share = SamplingConfig {
            max_insert_share: -0.1,
            ..Default::default()
        };
        assert!(bad_share.check().unwrap_err().contains("max_insert_share"));
    }

    /// A random reader of 5,000 misses and 80,000 accesses a second, one-second windows.
    fn reader(w: &mut Watch, c: &SamplingConfig, share: f64, quiet: bool) -> bool {
        w.sample_next(c, 5_000, 80_000, 1.0, share, quiet, false) == Next::Rest
    }

    #[test]
    fn a_busy_workload_is_rested_on_once_quiet_and_one_window_in_n_is_whole() {
        let c = SamplingConfig::default();
        let mut w = Watch::default();
        // Not all hits: whole windows while the tuner acts or has just acted.
        assert!(!reader(&mut w, &c, 1.0, false));
        for _ in 1..c.rest_after {
            assert!(!reader(&mut w, &c, 1.0, true));
        }
        // The third quiet window in a row: rest.
        assert!(reader(&mut w, &c, 1.0, true));
        // Then slices, and every rest_every-th window whole.
        let mut kinds = Vec::new();
        let mut share = 0.05;
        for _ in 0..3 * c.rest_every {
            let slice = reader(&mut w, &c, share, share >= 1.0);
            kinds.push(slice);
            share = if slice { 0.05 } else { 1.0 };
        }
        let whole = kinds.iter().filter(|&&s| !s).count();
        assert_eq!(whole, 3, "{kinds:?}");
        assert_eq!(w.wakes, 0);
        // All hits: a slice whatever the rest (the rule of the first part).
        let mut h = Watch::default();
        assert_eq!(h.sample_next(&c, 0, 80_000, 1.0, 1.0, false, false), Next::Hits);
        // A whole window that is not quiet (the guardrail checks vanilla): whole ones again.
        assert!(!reader(&mut w, &c, 1.0, false));
        assert!(!reader(&mut w, &c, 1.0, true));
    }

    #[test]
    fn a_slice_whose_rates_moved_wakes_the_tuner() {
        let c = SamplingConfig::default();
        for (added, accessed, wakes) in [
            // Same workload, noisy: rests on.
            (6_000, 70_000, false),
            (3_000, 120_000, false),
            // Three times the misses, a fifth of the accesses, or stopped: awake.
            (15_000, 80_000, true),
            (5_000, 16_000, true),
            (0, 0, true),
        ] {
            let mut w = Watch::default();
            for _ in 0..c.rest_after {
                reader(&mut w, &c, 1.0, true);
            }
            let next = w.sample_next(&c, added, accessed, 1.0, 0.05, false, false);
            assert_eq!(w.wakes, u64::from(wakes), "{added} {accessed}");
            let expect = if wakes { Next::Whole } else { Next::Rest };
            assert_eq!(next, expect, "{added} {accessed}");
        }
        // A few events in a slice of a quiet workload do not wake it.
        let mut w = Watch::default();
        let quiet_c = SamplingConfig {
            min_access_rate: 100.0,
            ..c
        };
        for _ in 0..c.rest_after {
            w.sample_next(&quiet_c, 10, 200, 1.0, 1.0, true, false);
        }
        assert_eq!(w.sample_next(&quiet_c, 30, 200, 1.0, 0.05, false, false), Next::Rest);
        assert_eq!(w.wakes, 0);
    }

    #[test]
    fn an_idle_workload_or_rest_every_one_is_never_rested_on() {
        let c = SamplingConfig::default();
        let mut w = Watch::default();
        for _ in 0..20 {
            // 1,000 events a second: watched whole, it costs nothing.
            assert_eq!(w.sample_next(&c, 100, 900, 1.0, 1.0, true, false), Next::Whole);
        }
        let never = SamplingConfig { rest_every: 1, ..c };
        let mut w = Watch::default();
        for _ in 0..20 {
            assert!(!reader(&mut w, &never, 1.0, true));
        }
        let bad = SamplingConfig { rest_every: 0, ..c };
        assert!(bad.check().unwrap_err().contains("--rest-every"));
    }

    #[test]
    fn a_slice_whose_processes_or_progress_moved_wakes_the_tuner() {
        let c = SamplingConfig::default();
        let mut w = Watch::default();
        for _ in 0..c.rest_after {
            reader(&mut w, &c, 1.0, true);
        }
        assert!(reader(&mut w, &c, 0.05, false));
        // Same rates, but the caller saw a process join or the progress fall: awake.
        assert_eq!(w.sample_next(&c, 5_000, 80_000, 1.0, 0.05, false, true), Next::Whole);
        assert_eq!(w.wakes, 1);
    }

    #[test]
    fn slices_of_hits_count_no_wake_and_misses_again_bring_a_whole_window() {
        let c = SamplingConfig::default();
        let mut w = Watch::default();
        // Quiet whole windows of hits, then slices of hits whose rate moves: no wake counted.
        for _ in 0..c.rest_after {
            assert_eq!(w.sample_next(&c, 0, 80_000, 1.0, 1.0, true, false), Next::Hits);
        }
        assert_eq!(w.sample_next(&c, 0, 30_000, 1.0, 0.05, false, false), Next::Hits);
        assert_eq!(w.wakes, 0);
        // A slice with misses again (though within a factor two of the reference): whole.
        let mut w = Watch::default();
        for _ in 0..c.rest_after {
            w.sample_next(&c, 60, 80_000, 1.0, 1.0, true, false);
        }
        assert_eq!(w.sample_next(&c, 100, 80_000, 1.0, 0.05, false, false), Next::Whole);
        assert_eq!(w.wakes, 0);
    }
}
