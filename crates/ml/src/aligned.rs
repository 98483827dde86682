//! A growable-once `f32` buffer aligned to a cache line.
//!
//! Weights are read 32 bytes at a time; from a `Vec<f32>` (16-byte aligned by malloc) half of
//! those loads can straddle two cache lines, and whether they do depended on where the
//! allocator happened to put the model: the same network measured 277 ns in one binary and
//! 364 ns in another. Storing weights 64-byte aligned makes the fast path the only path.

use alloc::vec::Vec;
use core::fmt;
use core::ops::{Deref, DerefMut};

/// Sixteen floats, one cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; 16]);

/// `len` floats stored from a 64-byte boundary. Dereferences to `[f32]`.
#[derive(Clone)]
pub struct AlignedVec {
    lines: Vec<Line>,
    len: usize,
}

impl AlignedVec {
    /// `n` zeros.
    pub fn zeros(n: usize) -> Self {
        AlignedVec {
            lines: alloc::vec![Line([0.0; 16]); n.div_ceil(16)],
            len: n,
        }
    }

    /// A copy of `values`.
    pub fn from_slice(values: &[f32]) -> Self {
        let mut v = Self::zeros(values.len());
        v.copy_from_slice(values);
        v
    }

    /// Bytes of memory held.
    pub fn bytes(&self) -> usize {
        self.lines.capacity() * core::mem::size_of::<Line>()
    }
}

impl Deref for AlignedVec {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        // SAFETY: `Line` is `repr(C)` around `[f32; 16]` with size 64 = 16 * 4, so the lines
        // of the Vec are one contiguous, initialised run of `16 * lines.len() >= len` floats.
        unsafe { core::slice::from_raw_parts(self.lines.as_ptr() as *const f32, self.len) }
    }
}

impl DerefMut for AlignedVec {
    fn deref_mut(&mut self) -> &mut [f32] {
        // SAFETY: as in `deref`; the borrow of `self` is unique.
        unsafe { core::slice::from_raw_parts_mut(self.lines.as_mut_ptr() as *mut f32, self.len) }
    }
}

impl From<Vec<f32>> for AlignedVec {
    fn from(v: Vec<f32>) -> Self {
        Self::from_slice(&v)
    }
}

impl PartialEq for AlignedVec {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl fmt::Debug for AlignedVec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_behaves_like_a_slice() {
        for n in [0, 1, 15, 16, 17, 7936] {
            let mut v = AlignedVec::zeros(n);
            assert_eq!(v.len(), n);
            assert_eq!(v.as_ptr() as usize % 64, 0);
            v.iter_mut().enumerate().for_each(|(i, x)| *x = i as f32);
            let w = AlignedVec::from(v.to_vec());
            assert_eq!(v, w);
            assert_eq!(v.clone()[..], w[..]);
        }
    }
}
