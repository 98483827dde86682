//! AVX-512 versions of kernels where sixteen lanes and mask registers cut the instruction
//! count. Every function here requires a CPU with AVX-512F and BW, AVX2, FMA, BMI1 and BMI2;
//! they are only reached through `super::tree_kernels`, after it checked.

use core::arch::x86_64::*;

/// QuickScorer's exit leaf for a narrow tree (at most `NARROW_LEAVES` leaves, so at most 30
/// splits in `BLOCKS` blocks, over rows of `N` features; see `kernels::TreeKernel` for the
/// contract). The row is two plain loads (`row_pair`); each block's features are picked from
/// them by one two-source permute and "goes right" is one compare into a mask register
/// (`!(x <= t)`, true for NaN as in the walk), giving the set R of splits the row goes right
/// at. The leaves that survive R are the AND of one table entry per ten bits of R
/// (`kernels::Survivors`); the exit leaf is the lowest survivor. Independent scalar loads
/// replace the broadcast of R and its vector tests against every leaf's set of splits (the
/// kernel before 2026-11-28): that form was tried again on a Sapphire Rapids host and lost,
/// its extra compares and broadcast all needing the permute's port.
///
/// # Safety
/// As `kernels::TreeKernel`, `t` is narrow with `BLOCKS` blocks, `x` holds `N` values; the CPU
/// has AVX-512F and BW, and BMI1.
#[target_feature(enable = "avx512f,avx512bw,bmi1,avx2,fma")]
#[inline]
pub(super) unsafe fn tree_leaf_narrow<const BLOCKS: usize, const N: usize>(
    x: *const f32,
    t: &super::TreeLayout,
) -> u64 {
    use super::SURVIVOR_BITS as B;
    const { assert!(BLOCKS == 1 || BLOCKS == 2) };
    // SAFETY: `row_pair` reads `x[..N]`, which the caller guarantees; every vector load is one
    // whole field of the layout; R holds real splits only (padding tests an always-zero lane
    // against +inf), at most 16 * BLOCKS of them and at most 30, so each table index is below
    // 2^B (with one block, R >> B is below 2^6); a trailing-zero count is at most 32, an index
    // `leaves` holds.
    unsafe {
        let (lo, hi) = row_pair::<N>(x);
        let block = |i: usize| {
            let lanes = _mm512_loadu_si512(t.pair_lanes[i].as_ptr().cast());
            let v = _mm512_permutex2var_ps(lo, lanes, hi);
            _mm512_cmp_ps_mask::<_CMP_NLE_UQ>(v, _mm512_load_ps(t.blocks[i].threshold.as_ptr()))
        };
        let tables = &t.survivors.0;
        let low = |r: u32| (r & ((1 << B) - 1)) as usize;
        let survivors = if BLOCKS == 1 {
            let right = block(0) as u32;
            tables[0].get_unchecked(low(right)) & tables[1].get_unchecked((right >> B) as usize)
        } else {
            // Written as the mask unpack (LLVM may still join the masks in general registers):
            // over many rows on KML's tree 1.59 ns a row, against 1.66 with a shift and an OR.
            let right = _cvtmask32_u32(_mm512_kunpackw(block(1).into(), block(0).into()));
            tables[0].get_unchecked(low(right))
                & tables[1].get_unchecked(low(right >> B))
                & tables[2].get_unchecked((right >> (2 * B)) as usize)
        };
        // The exit leaf survives (a leaf is only cleared by a split whose left subtree holds
        // it, and the row went right there), so the count is below the leaf count.
        *t.leaves.get_unchecked(survivors.trailing_zeros() as usize)
    }
}

/// [`tree_leaf_narrow`] as the target of a call (`kernels::TreeKernels::one`), in assembly on
/// registers zmm16-19 and k1-k2. Why not the intrinsics: compiled alone, LLVM joins the two
/// blocks' masks through general registers (two moves, a shift and an OR where `kunpckwd` and
/// one move do) and must clear the upper halves of zmm0-15 on return (`vzeroupper`), which
/// registers 16-31 do not need; on Sapphire Rapids that was 2.65 against 2.43 ns a call on
/// KML's tree, the difference between 1.9x and 2.1x KML's C (docs/benchmarks.md). Inlined into
/// a loop over many rows the intrinsics are better (the layout's loads leave the loop), so
/// [`tree_classes_narrow`] keeps them; both are tested against the walk
/// (`tree::scorer_tests`).
///
/// # Safety
/// As [`tree_leaf_narrow`], and the CPU has BMI2.
#[target_feature(enable = "avx512f,avx512bw,bmi1,bmi2,avx2,fma")]
pub(super) unsafe fn tree_leaf_narrow_call<const BLOCKS: usize, const N: usize>(
    x: *const f32,
    t: &super::TreeLayout,
) -> u64 {
    // The row's loads (`row_pair`'s, by `pair_width(N)`), then the blocks and the lookups. An
    // EVEX load into xmm16/17 clears the rest of zmm16/17, the lanes `pair_lane` counts on.
    macro_rules! narrow {
        ($lo:literal, $hi:literal) => {
            if BLOCKS == 1 {
                narrow!(@ $lo, $hi,
                    "kmovw {r:e}, k1",
                    "mov {a:e}, {r:e}",
                    "and {a:e}, {mask}",
                    "mov {o:e}, dword ptr [{t} + {a}*4 + {s0}]",
                    "shr {r:e}, {bits}",
                    "and {o:e}, dword ptr [{t} + {r}*4 + {s1}]",
                )
            } else {
                narrow!(@ $lo, $hi,
                    "vmovdqu32 zmm19, zmmword ptr [{t} + {lanes1}]",
                    "vpermi2ps zmm19, zmm16, zmm17",
                    "vcmpps k2, zmm19, zmmword ptr [{t} + {thr1}], 0x16",
                    "kunpckwd k1, k2, k1",
                    "kmovd {r:e}, k1",
                    "mov {a:e}, {r:e}",
                    "and {a:e}, {mask}",
                    "mov {o:e}, dword ptr [{t} + {a}*4 + {s0}]",
                    "rorx {a:e}, {r:e}, {bits}",
                    "and {a:e}, {mask}",
                    "and {o:e}, dword ptr [{t} + {a}*4 + {s1}]",
                    "shr {r:e}, {bits2}",
                    "and {o:e}, dword ptr [{t} + {r}*4 + {s2}]",
                )
            }
        };
        (@ $lo:literal, $hi:literal, $($lookup:literal,)*) => {{
            use core::mem::offset_of;
            use super::{SplitBlock, TreeLayout, Survivors, SURVIVOR_BITS as B};
            let out: u64;
            // SAFETY: as `tree_leaf_narrow`: the loads read `x[..N]` and whole fields of `t`;
            // R holds at most 30 real splits (16 with one block), so every table index is
            // below 2^B; a trailing-zero count is at most 32, an index `leaves` holds.
            unsafe {
                core::arch::asm!(
                    $lo,
                    $hi,
                    "vmovdqu32 zmm18, zmmword ptr [{t} + {lanes0}]",
                    "vpermi2ps zmm18, zmm16, zmm17",
                    // Predicate 0x16 is NLE_UQ: "goes right" is !(x <= t), true for NaN.
                    "vcmpps k1, zmm18, zmmword ptr [{t} + {thr0}], 0x16",
                    $($lookup,)*
                    "tzcnt {o:e}, {o:e}",
                    "mov {o}, qword ptr [{t} + {o}*8 + {leaves}]",
                    // Operands some copies leave unused (one block; a row with no second load).
                    "/* {x} {hi_at} {lanes1} {thr1} {s2} {bits2} */",
                    t = in(reg) t,
                    x = in(reg) x,
                    r = out(reg) _,
                    a = out(reg) _,
                    o = out(reg) out,
                    hi_at = const 4 * (N - super::pair_width(N)),
                    lanes0 = const offset_of!(TreeLayout, pair_lanes),
                    lanes1 = const offset_of!(TreeLayout, pair_lanes) + 64,
                    thr0 = const offset_of!(TreeLayout, blocks) + offset_of!(SplitBlock, threshold),
                    thr1 = const offset_of!(TreeLayout, blocks) + size_of::<SplitBlock>() + offset_of!(SplitBlock, threshold),
                    s0 = const offset_of!(TreeLayout, survivors),
                    s1 = const offset_of!(TreeLayout, survivors) + size_of::<Survivors>() / 3,
                    s2 = const offset_of!(TreeLayout, survivors) + 2 * size_of::<Survivors>() / 3,
                    leaves = const offset_of!(TreeLayout, leaves),
                    mask = const (1 << B) - 1,
                    bits = const B,
                    bits2 = const 2 * B,
                    out("zmm16") _, out("zmm17") _, out("zmm18") _, out("zmm19") _,
                    out("k1") _, out("k2") _,
                    options(pure, readonly, nostack),
                );
            }
            out
        }};
    }
    match super::pair_width(N) {
        0 => narrow!("vpxord xmm16, xmm16, xmm16", "vpxord xmm17, xmm17, xmm17"),
        1 => narrow!("vmovss xmm16, dword ptr [{x}]", "vpxord xmm17, xmm17, xmm17"),
        2 => narrow!(
            "vmovsd xmm16, qword ptr [{x}]",
            "vmovsd xmm17, qword ptr [{x} + {hi_at}]"
        ),
        _ => narrow!(
            "vmovups xmm16, xmmword ptr [{x}]",
            "vmovups xmm17, xmmword ptr [{x} + {hi_at}]"
        ),
    }
}

/// A row of `N` features as the narrow kernel's two permute sources: the first
/// `pair_width(N)` values in the low lanes of one register, the last as many in the other,
/// every other lane zero (`kernels::pair_lane` says where each feature lands). Reads `x[..N]`
/// and nothing else.
///
/// # Safety
/// `x` holds `N` values; the CPU has AVX-512F.
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
unsafe fn row_pair<const N: usize>(x: *const f32) -> (__m512, __m512) {
    // SAFETY: each load reads `pair_width(N)` values starting at 0 or at N - pair_width(N).
    unsafe {
        let (lo, hi) = match super::pair_width(N) {
            0 => (_mm_setzero_ps(), _mm_setzero_ps()),
            1 => (_mm_load_ss(x), _mm_setzero_ps()),
            2 => (
                _mm_castpd_ps(_mm_load_sd(x.cast())),
                _mm_castpd_ps(_mm_load_sd(x.add(N.saturating_sub(2)).cast())),
            ),
            _ => (_mm_loadu_ps(x), _mm_loadu_ps(x.add(N.saturating_sub(4)))),
        };
        (_mm512_zextps128_ps512(lo), _mm512_zextps128_ps512(hi))
    }
}

/// QuickScorer's exit leaf for a wide tree (32 to 64 leaves; see `kernels::TreeKernel` for the
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
pub(super) unsafe fn tree_classes_narrow<const BLOCKS: usize, const N: usize>(
    rows: &[f32],
    stride: usize,
    t: &super::TreeLayout,
    out: &mut [u32],
) {
    tree_rows!(rows, stride, t, out, tree_leaf_narrow::<BLOCKS, N>)
}

/// [`tree_leaf_wide`] over many rows (see `kernels::TreeRowsKernel`).
///
/// # Safety
/// As `kernels::TreeRowsKernel` and [`tree_leaf_wide`].
#[target_feature(enable = "avx512f,avx512bw,bmi1,avx2,fma")]
pub(super) unsafe fn tree_classes_wide(rows: &[f32], stride: usize, t: &super::TreeLayout, out: &mut [u32]) {
    tree_rows!(rows, stride, t, out, tree_leaf_wide)
}
