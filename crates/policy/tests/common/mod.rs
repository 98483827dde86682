//! Streams shared by the policy crate's tests.

use iolearn_policy::readahead::WindowStats;

/// A window of `n` page indices over a file of `pages`: a forward scan, or uniform random
/// reads (a fixed xorshift, so every run sees the same stream).
pub fn stream(pages: u64, n: u64, random: bool) -> WindowStats {
    let (mut w, mut x) = (WindowStats::default(), 0x9e37_79b9_7f4a_7c15u64);
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        w.push(if random { x % pages } else { i % pages });
    }
    w
}
