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
}
