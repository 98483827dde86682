//! AVX-512 versions of kernels where sixteen lanes and mask registers cut the instruction
//! count. Every function here requires a CPU with AVX-512F and BW, AVX2, FMA and BMI1; they
//! are only reached through `super::tree_kernels`, after it checked.

use core::arch::x86_64::*;

/// QuickScorer's exit leaf for a narrow tree (at most 32 leaves, so at most 31 splits in
/// `BLOCKS` blocks; see `kernels::TreeKernel` for the contract). Each block's features are
/// picked from the row by one permute and "goes right" is one compare into a mask register
/// (`!(x <= t)`, true for NaN as in the walk), giving the 32-bit set R of splits the row goes
/// right at. The leaves that survive R are the AND of four table entries, one per byte of R
/// (`kernels::Survivors`); the exit leaf is the lowest survivor. Four independent scalar loads
/// replace the broadcast of R and its vector tests against every leaf's set of splits (the
/// kernel before 2026-11-28): shorter and cheaper, 1.9 -> 1.4 ns a row over many rows on
/// KML's tree (docs/benchmarks.md).
///
/// # Safety
/// As `kernels::TreeKernel`, and `t` is narrow with `BLOCKS` blocks; the CPU has AVX-512F and
/// BW, and BMI1.
#[target_feature(enable = "avx512f,avx512bw,bmi1,avx2,fma")]
#[inline]
pub(super) unsafe fn tree_leaf_narrow<const BLOCKS: usize>(x: *const f32, t: &super::TreeLayout) -> u64 {
    // SAFETY: the masked load reads only the lanes `row_mask` sets, which the caller
    // guarantees `x` holds; blocks are aligned to 64 bytes by their type and every vector load
    // is one whole field of one; `BLOCKS` is at most `MAX_BLOCKS` (it is `n_blocks`, 1 or 2),
    // and each table index is one byte of R (below 256); a trailing-zero count is at most 32,
    // an index `leaves` holds.
    unsafe {
        let row = _mm512_maskz_loadu_ps(t.row_mask, x);
        let mut right = 0u32;
        for (i, b) in t.blocks[..BLOCKS].iter().enumerate() {
            let v = _mm512_permutexvar_ps(_mm512_load_si512(b.feature.as_ptr().cast()), row);
            let r = _mm512_cmp_ps_mask::<_CMP_NLE_UQ>(v, _mm512_load_ps(b.threshold.as_ptr()));
            right |= (r as u32) << (16 * i);
        }
        let tables = &t.survivors.0;
        let survivors = tables[0][(right & 0xff) as usize]
            & tables[1][(right >> 8 & 0xff) as usize]
            & tables[2][(right >> 16 & 0xff) as usize]
            & tables[3][(right >> 24) as usize];
        // The exit leaf survives (a leaf is only cleared by a split whose left subtree holds
        // it, and the row went right there), so the count is below the leaf count.
        *t.leaves.get_unchecked(survivors.trailing_zeros() as usize)
    }
}

/// QuickScorer's exit leaf for a wide tree (33 to 64 leaves; see `kernels::TreeKernel` for the
/// contract): sixteen splits per block, each split's feature picked from the row by one
/// permute, "goes right" by one compare into a mask register (`!(x <= t)`, true for NaN as in
/// the walk), and the left-subtree leaves of exactly those splits cleared by one masked
/// AND-NOT per mask word; the two words are reduced across lanes at the end.
///
/// # Safety
/// As `kernels::TreeKernel`, `t` wide; the CPU has AVX-512F and BW, and BMI1.
#[target_feature(enable = "avx512f,avx512bw,bmi1,avx2,fma")]
#[inline]
pub(super) unsafe fn tree_leaf_wide(x: *const f32, t: &super::TreeLayout) -> u64 {
    // SAFETY: the masked load reads only the lanes the caller guarantees; blocks are aligned
    // to 64 bytes by their type and every load is one whole field of one; a trailing-zero
    // count is at most 64, an index `leaves` holds (65 entries when wide).
    unsafe {
        let row = _mm512_maskz_loadu_ps(t.row_mask, x);
        let ones = _mm512_set1_epi32(-1);
        let (mut lo, mut hi) = (ones, ones);
        for b in t.used_blocks() {
            let v = _mm512_permutexvar_ps(_mm512_load_si512(b.feature.as_ptr().cast()), row);
            let right = _mm512_cmp_ps_mask::<_CMP_NLE_UQ>(v, _mm512_load_ps(b.threshold.as_ptr()));
            // Where the row goes right: lo = !left & lo.
            lo = _mm512_mask_andnot_epi32(lo, right, _mm512_load_si512(b.left_lo.as_ptr().cast()), lo);
            hi = _mm512_mask_andnot_epi32(hi, right, _mm512_load_si512(b.left_hi.as_ptr().cast()), hi);
        }
        let (l, h) = (_mm512_reduce_and_epi32(lo) as u32, _mm512_reduce_and_epi32(hi) as u32);
        *t.leaves
            .get_unchecked((l as u64 | (h as u64) << 32).trailing_zeros() as usize)
    }
}

/// [`tree_leaf_narrow`] over many rows (see `kernels::TreeRowsKernel`): inlined into this
/// loop, so the compiler can hoist its layout loads out of it.
///
/// # Safety
/// As `kernels::TreeRowsKernel` and [`tree_leaf_narrow`].
#[target_feature(enable = "avx512f,avx512bw,bmi1,avx2,fma")]
pub(super) unsafe fn tree_classes_narrow<const BLOCKS: usize>(
    rows: &[f32],
    stride: usize,
    t: &super::TreeLayout,
    out: &mut [u32],
) {
    tree_rows!(rows, stride, t, out, tree_leaf_narrow::<BLOCKS>)
}

/// [`tree_leaf_wide`] over many rows (see `kernels::TreeRowsKernel`).
///
/// # Safety
/// As `kernels::TreeRowsKernel` and [`tree_leaf_wide`].
#[target_feature(enable = "avx512f,avx512bw,bmi1,avx2,fma")]
pub(super) unsafe fn tree_classes_wide(rows: &[f32], stride: usize, t: &super::TreeLayout, out: &mut [u32]) {
    tree_rows!(rows, stride, t, out, tree_leaf_wide)
}
