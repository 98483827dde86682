//! AVX2 + FMA versions of the hot kernels, written with intrinsics so their code does not
//! depend on what the auto-vectoriser makes of a loop. Every function here requires a CPU with
//! AVX2 and FMA; they are only reached through [`super::simd`], after it checked.
//!
//! Ragged edges use masked loads and stores (`vmaskmovps`): a layer with 5 outputs is one
//! 8-lane block whose 3 extra lanes read as zero and are never written.

use super::Act;
use core::arch::x86_64::*;

const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;

/// Lane mask with the first `n` (0..=8) lanes set.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn mask(n: usize) -> __m256i {
    let idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_cmpgt_epi32(_mm256_set1_epi32(n as i32), idx)
}

/// Load `lanes` floats (all 8 without a mask).
///
/// # Safety
/// `p..p + lanes` must be readable.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn load(p: *const f32, lanes: usize, m: __m256i) -> __m256 {
    // SAFETY: the caller guarantees `lanes` readable floats; the mask covers exactly them.
    unsafe {
        if lanes == 8 {
            _mm256_loadu_ps(p)
        } else {
            _mm256_maskload_ps(p, m)
        }
    }
}

/// `e^x` on 8 lanes: the same method as [`super::exp_approx`], with fused multiply-adds.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn exp8(x: __m256) -> __m256 {
    let x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3)), _mm256_set1_ps(88.0));
    let magic = _mm256_set1_ps(12_582_912.0);
    let t = _mm256_fmadd_ps(x, _mm256_set1_ps(core::f32::consts::LOG2_E), magic);
    let n = _mm256_sub_ps(t, magic);
    let n_int = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4B40_0000));
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), x);
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
    let r2 = _mm256_mul_ps(r, r);
    let p01 = _mm256_add_ps(_mm256_set1_ps(1.0), r);
    let p23 = _mm256_fmadd_ps(r, _mm256_set1_ps(0.166_666_67), _mm256_set1_ps(0.5));
    let p45 = _mm256_fmadd_ps(r, _mm256_set1_ps(0.008_333_78), _mm256_set1_ps(0.041_666_5));
    let p = _mm256_fmadd_ps(r2, _mm256_set1_ps(0.001_394_4), p45);
    let p = _mm256_fmadd_ps(r2, p, p23);
    let p = _mm256_fmadd_ps(r2, p, p01);
    let scale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n_int, _mm256_set1_epi32(127)), 23));
    _mm256_mul_ps(p, scale)
}

/// `act` on 8 lanes.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn act8(act: Act, v: __m256) -> __m256 {
    let one = _mm256_set1_ps(1.0);
    match act {
        Act::Identity => v,
        Act::ReLU => _mm256_max_ps(v, _mm256_setzero_ps()),
        Act::Sigmoid => {
            let e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), v));
            _mm256_div_ps(one, _mm256_add_ps(one, e))
        }
        Act::Tanh => {
            let e = exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0), v));
            _mm256_sub_ps(_mm256_div_ps(_mm256_set1_ps(2.0), _mm256_add_ps(one, e)), one)
        }
    }
}

/// `y = act(x)` over a slice.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn activate_slice(act: Act, x: &[f32], y: &mut [f32]) {
    let n = x.len().min(y.len());
    let mut i = 0;
    // SAFETY: every access is inside `x[..n]` / `y[..n]`: full loads/stores at `i + 8 <= n`,
    // masked ones for the `n - i < 8` tail.
    unsafe {
        while i + 8 <= n {
            _mm256_storeu_ps(y.as_mut_ptr().add(i), act8(act, _mm256_loadu_ps(x.as_ptr().add(i))));
            i += 8;
        }
        if i < n {
            let m = mask(n - i);
            let v = act8(act, _mm256_maskload_ps(x.as_ptr().add(i), m));
            _mm256_maskstore_ps(y.as_mut_ptr().add(i), m, v);
        }
    }
}

/// `y = act(W x + b)`, `W` input-major (`w[i * out + o]`). Blocks of 32 outputs keep four
/// sums in registers across the whole input; blocks of 8 keep two (even and odd inputs, to
/// halve the dependency chain); the last `out % 8` outputs are a masked block.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn linear_in_major(w: &[f32], b: &[f32], x: &[f32], y: &mut [f32], act: Act) {
    let (out, n_in) = (b.len(), x.len());
    assert!(w.len() >= n_in * out && y.len() >= out, "dense layer buffers too short");
    let (wp, bp, yp) = (w.as_ptr(), b.as_ptr(), y.as_mut_ptr());
    let mut o = 0;
    // SAFETY: reads of `w` stay below `(n_in - 1) * out + out = n_in * out <= w.len()`, of `b`
    // and writes of `y` below `out` (full blocks end at `o + 32` or `o + 8 <= out`; the tail
    // block is masked to `out - o` lanes), as asserted above.
    unsafe {
        while o + 64 <= out {
            // Eight 8-lane sums, one chain each over all inputs: each input row is read as
            // 256 contiguous bytes, and a wide layer is swept in half as many passes.
            let mut a = [_mm256_setzero_ps(); 8];
            for (k, acc) in a.iter_mut().enumerate() {
                *acc = _mm256_loadu_ps(bp.add(o + 8 * k));
            }
            for (i, &xi) in x.iter().enumerate() {
                let xv = _mm256_set1_ps(xi);
                let c = wp.add(i * out + o);
                for (k, acc) in a.iter_mut().enumerate() {
                    *acc = _mm256_fmadd_ps(_mm256_loadu_ps(c.add(8 * k)), xv, *acc);
                }
            }
            for (k, acc) in a.iter().enumerate() {
                _mm256_storeu_ps(yp.add(o + 8 * k), act8(act, *acc));
            }
            o += 64;
        }
        while o + 32 <= out {
            // Four 8-lane sums for even inputs, four for odd: eight independent chains of
            // n_in / 2 multiply-adds (a chain of n_in would leave the FMA units waiting).
            let mut e = [
                _mm256_loadu_ps(bp.add(o)),
                _mm256_loadu_ps(bp.add(o + 8)),
                _mm256_loadu_ps(bp.add(o + 16)),
                _mm256_loadu_ps(bp.add(o + 24)),
            ];
            let mut d = [_mm256_setzero_ps(); 4];
            let mut i = 0;
            while i + 2 <= n_in {
                let (x0, x1) = (_mm256_set1_ps(x[i]), _mm256_set1_ps(x[i + 1]));
                let (c0, c1) = (wp.add(i * out + o), wp.add((i + 1) * out + o));
                for k in 0..4 {
                    e[k] = _mm256_fmadd_ps(_mm256_loadu_ps(c0.add(8 * k)), x0, e[k]);
                    d[k] = _mm256_fmadd_ps(_mm256_loadu_ps(c1.add(8 * k)), x1, d[k]);
                }
                i += 2;
            }
            if i < n_in {
                let (x0, c0) = (_mm256_set1_ps(x[i]), wp.add(i * out + o));
                for (k, acc) in e.iter_mut().enumerate() {
                    *acc = _mm256_fmadd_ps(_mm256_loadu_ps(c0.add(8 * k)), x0, *acc);
                }
            }
            for k in 0..4 {
                _mm256_storeu_ps(yp.add(o + 8 * k), act8(act, _mm256_add_ps(e[k], d[k])));
            }
            o += 32;
        }
        while o < out {
            let lanes = (out - o).min(8);
            let m = mask(lanes);
            let mut even = load(bp.add(o), lanes, m);
            let mut odd = _mm256_setzero_ps();
            let mut i = 0;
            while i + 2 <= n_in {
                even = _mm256_fmadd_ps(load(wp.add(i * out + o), lanes, m), _mm256_set1_ps(x[i]), even);
                odd = _mm256_fmadd_ps(load(wp.add((i + 1) * out + o), lanes, m), _mm256_set1_ps(x[i + 1]), odd);
                i += 2;
            }
            if i < n_in {
                even = _mm256_fmadd_ps(load(wp.add(i * out + o), lanes, m), _mm256_set1_ps(x[i]), even);
            }
            let v = act8(act, _mm256_add_ps(even, odd));
            if lanes == 8 {
                _mm256_storeu_ps(yp.add(o), v);
            } else {
                _mm256_maskstore_ps(yp.add(o), m, v);
            }
            o += lanes;
        }
    }
}

/// `y = act(W x + b)`, `W` output-major (`w[o * in + i]`): one dot product per output, in
/// four independent 8-lane sums, the tail masked.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn linear_out_major(w: &[f32], b: &[f32], x: &[f32], y: &mut [f32], act: Act) {
    let (out, n_in) = (b.len(), x.len());
    assert!(w.len() >= n_in * out && y.len() >= out, "dense layer buffers too short");
    let xp = x.as_ptr();
    let mut sums = [0.0f32; 8];
    // SAFETY: row `o` is `w[o * n_in..(o + 1) * n_in]`, inside `w` as asserted; every read of
    // a row and of `x` is below `n_in` (full blocks end at `i + 32` or `i + 8 <= n_in`, the
    // tail is masked to `n_in - i` lanes).
    unsafe {
        for o in 0..out {
            let rp = w.as_ptr().add(o * n_in);
            let mut a = [_mm256_setzero_ps(); 4];
            let mut i = 0;
            while i + 32 <= n_in {
                for (k, acc) in a.iter_mut().enumerate() {
                    *acc = _mm256_fmadd_ps(
                        _mm256_loadu_ps(rp.add(i + 8 * k)),
                        _mm256_loadu_ps(xp.add(i + 8 * k)),
                        *acc,
                    );
                }
                i += 32;
            }
            while i + 8 <= n_in {
                a[0] = _mm256_fmadd_ps(_mm256_loadu_ps(rp.add(i)), _mm256_loadu_ps(xp.add(i)), a[0]);
                i += 8;
            }
            if i < n_in {
                let m = mask(n_in - i);
                a[1] = _mm256_fmadd_ps(_mm256_maskload_ps(rp.add(i), m), _mm256_maskload_ps(xp.add(i), m), a[1]);
            }
            let s = _mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3]));
            let h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
            let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
            let h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
            sums[o % 8] = _mm_cvtss_f32(h) + b[o];
            if o % 8 == 7 || o + 1 == out {
                // Activate the gathered sums eight at a time.
                let start = o / 8 * 8;
                let n = o + 1 - start;
                let v = act8(act, _mm256_loadu_ps(sums.as_ptr()));
                let mut lanes = [0.0f32; 8];
                _mm256_storeu_ps(lanes.as_mut_ptr(), v);
                y[start..start + n].copy_from_slice(&lanes[..n]);
            }
        }
    }
}

/// [`super::linear_i16_pairs`]: one `vpmaddwd` multiplies 16 weight/input pairs and adds
/// neighbours, giving 8 outputs' share of two inputs; four output blocks run side by side.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn linear_i16_pairs(packed: &[i16], xp: &[i32], acc_out: &mut [i32]) {
    let np = xp.len();
    let nb = acc_out.len().div_ceil(8);
    assert!(packed.len() >= nb * np * 16, "packed weights too short");
    let pp = packed.as_ptr();
    let mut lanes = [0i32; 8];
    let mut blk = 0;
    // SAFETY: block `b` reads `packed[(b * np + p) * 16..+16]` for `p < np` and `b < nb`,
    // inside `packed` as asserted; full blocks store 8 lanes at `o..o + 8 <= acc_out.len()`.
    unsafe {
        while blk < nb {
            let group = (nb - blk).min(4);
            let mut acc = [_mm256_setzero_si256(); 4];
            if group == 4 {
                // The common case, unrolled: four blocks' weights per input pair.
                let (b0, b1, b2, b3) = (
                    pp.add(blk * np * 16),
                    pp.add((blk + 1) * np * 16),
                    pp.add((blk + 2) * np * 16),
                    pp.add((blk + 3) * np * 16),
                );
                for (p, &pair) in xp.iter().enumerate() {
                    let xv = _mm256_set1_epi32(pair);
                    let w = |b: *const i16| _mm256_loadu_si256(b.add(p * 16) as *const __m256i);
                    acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(w(b0), xv));
                    acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(w(b1), xv));
                    acc[2] = _mm256_add_epi32(acc[2], _mm256_madd_epi16(w(b2), xv));
                    acc[3] = _mm256_add_epi32(acc[3], _mm256_madd_epi16(w(b3), xv));
                }
            } else {
                for (p, &pair) in xp.iter().enumerate() {
                    let xv = _mm256_set1_epi32(pair);
                    for (g, a) in acc.iter_mut().enumerate().take(group) {
                        let wv = _mm256_loadu_si256(pp.add(((blk + g) * np + p) * 16) as *const __m256i);
                        *a = _mm256_add_epi32(*a, _mm256_madd_epi16(wv, xv));
                    }
                }
            }
            for (g, a) in acc.iter().enumerate().take(group) {
                let o = (blk + g) * 8;
                if o + 8 <= acc_out.len() {
                    _mm256_storeu_si256(acc_out.as_mut_ptr().add(o) as *mut __m256i, *a);
                } else {
                    _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, *a);
                    let n = acc_out.len() - o;
                    acc_out[o..o + n].copy_from_slice(&lanes[..n]);
                }
            }
            blk += group;
        }
    }
}

/// QuickScorer's exit leaf (see `kernels::TreeKernel` for the contract): eight splits per
/// step (half a block), each split's feature picked from the row by a lane permute, "goes
/// right" by one compare (`!(x <= t)`, true for NaN as in the walk), the left-subtree leaves of
/// those splits cleared from one accumulator per mask word (`WIDE`: two), reduced across lanes
/// at the end. `BLOCKS` > 0 fixes the number of blocks (the loop then unrolls); 0 takes them all.
///
/// # Safety
/// As `kernels::TreeKernel` (`x` points to a value for every lane `t.lanes` sets); `WIDE` is
/// `t.wide()`; `BLOCKS` is 0 or `t.n_blocks`.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(super) unsafe fn tree_leaf<const WIDE: bool, const BLOCKS: usize>(x: *const f32, t: &super::TreeLayout) -> u64 {
    let leaves = &t.leaves[..];
    // SAFETY: the masked load reads only the lanes the caller guarantees; blocks are aligned
    // to 64 bytes by their type, and every load is inside one; a trailing-zero count is at
    // most 32 (64 when `WIDE`), an index `leaves` holds.
    unsafe {
        let row = _mm256_maskload_ps(x, _mm256_loadu_si256(t.lanes.as_ptr().cast()));
        let ones = _mm256_set1_epi32(-1);
        let (mut lo, mut hi) = (ones, ones);
        let blocks = if BLOCKS > 0 {
            &t.blocks[..BLOCKS]
        } else {
            t.used_blocks()
        };
        for b in blocks {
            for h in [0, 8] {
                let v = _mm256_permutevar8x32_ps(row, _mm256_load_si256(b.feature.as_ptr().add(h).cast()));
                let right = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_NLE_UQ>(
                    v,
                    _mm256_load_ps(b.threshold.as_ptr().add(h)),
                ));
                // lo &= !(right & left): a split the row leaves to the right clears its left leaves.
                let left = _mm256_load_si256(b.left_lo.as_ptr().add(h).cast());
                lo = _mm256_andnot_si256(_mm256_and_si256(right, left), lo);
                if WIDE {
                    let left = _mm256_load_si256(b.left_hi.as_ptr().add(h).cast());
                    hi = _mm256_andnot_si256(_mm256_and_si256(right, left), hi);
                }
            }
        }
        let word = |v: __m256i| -> u32 {
            let a = _mm_and_si128(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
            let a = _mm_and_si128(a, _mm_shuffle_epi32::<0b0100_1110>(a));
            let a = _mm_and_si128(a, _mm_shuffle_epi32::<0b1011_0001>(a));
            _mm_cvtsi128_si32(a) as u32
        };
        let exit = if WIDE {
            (word(lo) as u64 | (word(hi) as u64) << 32).trailing_zeros() as usize
        } else {
            word(lo).trailing_zeros() as usize
        };
        // The exit leaf always exists (a leaf's bit is only cleared by a split whose left
        // subtree holds it, and the row went right there, so the leaf it reaches keeps its
        // bit); and `leaves` has an entry for every index the bits can give (65).
        *leaves.as_ptr().add(exit)
    }
}

/// [`tree_leaf`] over many rows (see `kernels::TreeRowsKernel`): inlined into this loop, so
/// the compiler can hoist its layout loads out of it.
///
/// # Safety
/// As `kernels::TreeRowsKernel` and [`tree_leaf`].
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn tree_classes<const WIDE: bool, const BLOCKS: usize>(
    rows: &[f32],
    stride: usize,
    t: &super::TreeLayout,
    out: &mut [u32],
) {
    tree_rows!(rows, stride, t, out, tree_leaf::<WIDE, BLOCKS>)
}
