//! AVX-512 versions of kernels where sixteen lanes and mask registers cut the instruction
//! count. Every function here requires a CPU with AVX-512F (and AVX2, which the row mask is
//! read with); they are only reached through `super::tree_kernels`, after it checked.

use core::arch::x86_64::*;

/// QuickScorer's exit leaf (see `kernels::TreeKernel` for the contract): sixteen splits per
/// block, each split's feature picked from the row by one permute, "goes right" by one
/// compare into a mask register (`!(x <= t)`, true for NaN as in the walk), and the
/// left-subtree leaves of exactly those splits cleared by one masked AND-NOT per mask word
/// (`WIDE`: two); the words are reduced across lanes at the end. `BLOCKS` > 0 fixes the
/// number of blocks (the loop then unrolls); 0 takes them all.
///
/// # Safety
/// `x` holds a value for every lane `lanes` sets; block features are among those lanes;
/// `leaves` has 33 entries (65 when `WIDE`); `BLOCKS` is 0 or `blocks.len()`.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn tree_leaf<const WIDE: bool, const BLOCKS: usize>(
    x: &[f32],
    lanes: &[i32; 8],
    blocks: &[super::SplitBlock],
    leaves: &[u64],
) -> u64 {
    // SAFETY: the masked load reads only the lanes the caller guarantees (the mask is built
    // from `lanes`); blocks are aligned to 64 bytes by their type and every load is one
    // whole field of one; a trailing-zero count is at most 32 (64 when `WIDE`), an index
    // `leaves` holds.
    unsafe {
        let k = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_loadu_si256(lanes.as_ptr().cast()))) as __mmask16;
        let row = _mm512_maskz_loadu_ps(k, x.as_ptr());
        let ones = _mm512_set1_epi32(-1);
        let (mut lo, mut hi) = (ones, ones);
        let blocks = if BLOCKS > 0 {
            blocks.get_unchecked(..BLOCKS)
        } else {
            blocks
        };
        for b in blocks {
            let v = _mm512_permutexvar_ps(_mm512_load_si512(b.feature.as_ptr().cast()), row);
            let right = _mm512_cmp_ps_mask::<_CMP_NLE_UQ>(v, _mm512_load_ps(b.threshold.as_ptr()));
            // Where the row goes right: lo = !left & lo.
            lo = _mm512_mask_andnot_epi32(lo, right, _mm512_load_si512(b.left_lo.as_ptr().cast()), lo);
            if WIDE {
                hi = _mm512_mask_andnot_epi32(hi, right, _mm512_load_si512(b.left_hi.as_ptr().cast()), hi);
            }
        }
        let exit = if WIDE {
            let (l, h) = (_mm512_reduce_and_epi32(lo) as u32, _mm512_reduce_and_epi32(hi) as u32);
            (l as u64 | (h as u64) << 32).trailing_zeros() as usize
        } else {
            (_mm512_reduce_and_epi32(lo) as u32).trailing_zeros() as usize
        };
        *leaves.as_ptr().add(exit)
    }
}
