//! The inner loops of inference: dense layers (with a fused activation) and activations.
//!
//! Each kernel is written once as plain Rust the compiler can vectorise and marked
//! `#[inline(always)]`; callers put a whole forward pass inside [`simd`], which compiles it for
//! the baseline target and, with `std` on x86-64, for AVX2 + FMA, chosen at run time
//! (`is_x86_feature_detected!` caches its answer, so the check is a load and a branch). The two
//! builds may differ in the last bit (fused multiply-add rounds once); one machine always takes
//! the same path, so its results are reproducible.

/// The body of a [`TreeRowsKernel`]: the one-row kernel `one` on each row in turn. Expanded
/// inside each rows kernel's own `#[target_feature]` function, so `one` is inlined with the
/// same instructions and the layout's loads can leave the loop (a generic function would not
/// carry the target features, and a call per row is what the rows kernels exist to avoid).
#[cfg(all(feature = "std", target_arch = "x86_64"))]
macro_rules! tree_rows {
    ($rows:ident, $stride:ident, $t:ident, $out:ident, $one:expr) => {{
        debug_assert!($out.is_empty() || $rows.len() >= ($out.len() - 1) * $stride + $t.row_mask.count_ones() as usize);
        for (k, o) in $out.iter_mut().enumerate() {
            // SAFETY: row k starts at `k * stride` and is whole inside `rows` (the contract of
            // `TreeRowsKernel`), and the kernel's own contract is the caller's.
            *o = unsafe { $one($rows.as_ptr().add(k * $stride), $t) } as u32;
        }
    }};
}

#[cfg(all(feature = "std", target_arch = "x86_64"))]
mod avx2;
#[cfg(all(feature = "std", target_arch = "x86_64"))]
mod avx512;

/// Output columns kept in registers at once: 16 f32 = two AVX2 registers, twice (even and odd
/// inputs): four accumulators leave room for weights without spilling to the stack.
const BLOCK: usize = 32;

/// The activation applied to a dense layer's outputs before they are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Act {
    /// None: the raw sums.
    Identity,
    /// Logistic.
    Sigmoid,
    /// max(0, x).
    ReLU,
    /// Hyperbolic tangent.
    Tanh,
}

/// `c + a * b`, fused when `FMA` (only inside [`simd`]'s AVX2 + FMA copy: anywhere else
/// `mul_add` would become a slow library call).
#[inline(always)]
fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(feature = "std")]
    if FMA {
        return a.mul_add(b, c);
    }
    c + a * b
}

/// `e^x` within 2 ulp over the whole f32 range (clamped to finite results), without branches
/// or calls so a loop of it vectorises: `x = n ln2 + r`, `|r| <= ln2/2`, `e^r` by a degree-6
/// polynomial, `2^n` by building the exponent bits.
#[inline(always)]
pub(crate) fn exp_approx(x: f32) -> f32 {
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let x = x.clamp(-87.3, 88.0);
    // n = round(x / ln 2) by the add-magic-number trick (exact for |n| < 2^22); t's low
    // mantissa bits then hold n as an integer, so no float-to-int conversion is needed.
    let t = x * core::f32::consts::LOG2_E + 12_582_912.0;
    let n = t - 12_582_912.0;
    let n_int = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    let r = (x - n * LN2_HI) - n * LN2_LO;
    // Estrin's scheme: the polynomial in three levels instead of a six-step Horner chain.
    let r2 = r * r;
    let p01 = 1.0 + r;
    let p23 = 0.5 + r * 0.166_666_67;
    let p45 = 0.041_666_5 + r * 0.008_333_78;
    let p6 = 0.001_394_4;
    let p = p01 + r2 * (p23 + r2 * (p45 + r2 * p6));
    p * f32::from_bits((n_int.wrapping_add(127) as u32) << 23)
}

/// Apply `act` to one value.
#[inline(always)]
pub(crate) fn activate(act: Act, v: f32) -> f32 {
    match act {
        Act::Identity => v,
        Act::Sigmoid => 1.0 / (1.0 + exp_approx(-v)),
        Act::ReLU => {
            if v > 0.0 {
                v
            } else {
                0.0
            }
        }
        // tanh(v) = 2 sigmoid(2v) - 1: one exp, no branch, absolute error ~1e-7.
        Act::Tanh => 2.0 / (1.0 + exp_approx(-2.0 * v)) - 1.0,
    }
}

/// `y = act(x)` over a slice, eight lanes at a time (a short tail goes through a padded block)
/// so every value takes the vector path.
#[inline(always)]
pub(crate) fn activate_slice<const FMA: bool>(act: Act, x: &[f32], y: &mut [f32]) {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if FMA {
        // SAFETY: `FMA` is true only inside `simd`'s AVX2 + FMA path, after the CPU check.
        return unsafe { avx2::activate_slice(act, x, y) };
    }
    let n = x.len().min(y.len());
    let (x, y) = (&x[..n], &mut y[..n]);
    let full = n / 8 * 8;
    for (xs, ys) in x.chunks_exact(8).zip(y.chunks_exact_mut(8)) {
        store_activated::<8>(act, xs.try_into().unwrap(), ys);
    }
    if full < n {
        let mut lanes = [0.0f32; 8];
        for (l, &v) in lanes.iter_mut().zip(&x[full..]) {
            *l = v;
        }
        let mut out = [0.0f32; 8];
        store_activated::<8>(act, &lanes, &mut out);
        for (o, &l) in y[full..].iter_mut().zip(&out) {
            *o = l;
        }
    }
}

/// `y = act(W x + b)` with `W` input-major (`w[i * out + o]`). Outputs are processed in blocks
/// whose partial sums stay in registers across the whole input, so each weight is loaded once
/// and each output written once, activated. A ragged end is handled without a scalar loop: by
/// one more 8-wide block overlapping the previous one (recomputing a few outputs is cheaper
/// than doing the rest one by one), or, for layers narrower than 8, by a fully unrolled block.
#[inline(always)]
pub(crate) fn linear_in_major<const FMA: bool>(w: &[f32], b: &[f32], x: &[f32], y: &mut [f32], act: Act) {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if FMA {
        // SAFETY: `FMA` is true only inside `simd`'s AVX2 + FMA path, after the CPU check.
        return unsafe { avx2::linear_in_major(w, b, x, y, act) };
    }
    let out = b.len();
    debug_assert_eq!(w.len(), x.len() * out);
    let mut o = 0;
    while o + BLOCK <= out {
        block::<BLOCK, FMA>(w, b, x, y, o, act);
        o += BLOCK;
    }
    while o + 8 <= out {
        block::<8, FMA>(w, b, x, y, o, act);
        o += 8;
    }
    if o < out {
        match out {
            8.. => block::<8, FMA>(w, b, x, y, out - 8, act),
            1 => block::<1, FMA>(w, b, x, y, 0, act),
            2 => block::<2, FMA>(w, b, x, y, 0, act),
            3 => block::<3, FMA>(w, b, x, y, 0, act),
            4 => block::<4, FMA>(w, b, x, y, 0, act),
            5 => block::<5, FMA>(w, b, x, y, 0, act),
            6 => block::<6, FMA>(w, b, x, y, 0, act),
            _ => block::<7, FMA>(w, b, x, y, 0, act),
        }
    }
}

/// Outputs `o..o + N` of an input-major dense layer, sums in an `N`-wide register block. Even
/// and odd inputs go to two separate sums, halving the chain of dependent multiply-adds that
/// bounds a small layer's latency.
#[inline(always)]
fn block<const N: usize, const FMA: bool>(w: &[f32], b: &[f32], x: &[f32], y: &mut [f32], o: usize, act: Act) {
    let out = b.len();
    let mut even = [0.0f32; N];
    let mut odd = [0.0f32; N];
    even.copy_from_slice(&b[o..o + N]);
    // Two input columns (2 * out weights) per step; the slice bounds are loop-invariant, so
    // the compiler checks them once.
    let pairs = w.chunks_exact(2 * out);
    let last = pairs.remainder();
    for (cols, xs) in pairs.zip(x.chunks_exact(2)) {
        let c0: &[f32; N] = cols[o..o + N].try_into().unwrap();
        let c1: &[f32; N] = cols[out + o..out + o + N].try_into().unwrap();
        let (x0, x1) = (xs[0], xs[1]);
        if N >= 32 {
            // Wide blocks already have N / 8 independent sums; a second set would spill.
            for k in 0..N {
                even[k] = madd::<FMA>(c1[k], x1, madd::<FMA>(c0[k], x0, even[k]));
            }
        } else {
            for k in 0..N {
                even[k] = madd::<FMA>(c0[k], x0, even[k]);
                odd[k] = madd::<FMA>(c1[k], x1, odd[k]);
            }
        }
    }
    if x.len() % 2 == 1 {
        let c: &[f32; N] = last[o..o + N].try_into().unwrap();
        let xi = x[x.len() - 1];
        for k in 0..N {
            even[k] = madd::<FMA>(c[k], xi, even[k]);
        }
    }
    let mut sums = [0.0f32; N];
    for k in 0..N {
        sums[k] = even[k] + odd[k];
    }
    store_activated(act, &sums, &mut y[o..o + N]);
}

/// `y = act(v)` for a register block; the `match` is outside the loops so each loop is a
/// straight run of vector instructions.
#[inline(always)]
fn store_activated<const N: usize>(act: Act, v: &[f32; N], y: &mut [f32]) {
    let y: &mut [f32; N] = y.try_into().unwrap();
    match act {
        Act::Identity => *y = *v,
        Act::Sigmoid => {
            for k in 0..N {
                y[k] = activate(Act::Sigmoid, v[k]);
            }
        }
        Act::ReLU => {
            for k in 0..N {
                y[k] = v[k].max(0.0);
            }
        }
        Act::Tanh => {
            for k in 0..N {
                y[k] = activate(Act::Tanh, v[k]);
            }
        }
    }
}

/// `y = act(W x + b)` with `W` output-major (`w[o * in + i]`), for narrow layers over long
/// inputs (LinnOS's 256 -> 2): each output is a dot product over contiguous weights, in four
/// independent 8-lane sums.
#[inline(always)]
pub(crate) fn linear_out_major<const FMA: bool>(w: &[f32], b: &[f32], x: &[f32], y: &mut [f32], act: Act) {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if FMA {
        // SAFETY: `FMA` is true only inside `simd`'s AVX2 + FMA path, after the CPU check.
        return unsafe { avx2::linear_out_major(w, b, x, y, act) };
    }
    let n_in = x.len();
    for (o, row) in w.chunks_exact(n_in).enumerate() {
        let mut acc = [[0.0f32; 8]; 4];
        let (rc, xc) = (row.chunks_exact(32), x.chunks_exact(32));
        let tail = rc
            .remainder()
            .iter()
            .zip(xc.remainder())
            .fold(0.0f32, |s, (a, b)| madd::<FMA>(*a, *b, s));
        for (r32, x32) in rc.zip(xc) {
            for (a, (r8, x8)) in acc.iter_mut().zip(r32.chunks_exact(8).zip(x32.chunks_exact(8))) {
                for k in 0..8 {
                    a[k] = madd::<FMA>(r8[k], x8[k], a[k]);
                }
            }
        }
        let mut lanes = [0.0f32; 8];
        for k in 0..8 {
            lanes[k] = (acc[0][k] + acc[1][k]) + (acc[2][k] + acc[3][k]);
        }
        let sum = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
        y[o] = activate(act, b[o] + sum + tail);
    }
}

/// Integer dense layer (LinnOS's x1000 network): i32 operands, i64 sums; `w` input-major.
#[inline(always)]
pub(crate) fn linear_i64_body(w: &[i32], x: &[i32], acc_out: &mut [i64]) {
    let out = acc_out.len();
    let mut o = 0;
    while o + 16 <= out {
        let mut acc = [0i64; 16];
        for (i, &xi) in x.iter().enumerate() {
            let col = &w[i * out + o..i * out + o + 16];
            for k in 0..16 {
                acc[k] += col[k] as i64 * xi as i64;
            }
        }
        acc_out[o..o + 16].copy_from_slice(&acc);
        o += 16;
    }
    for oo in o..out {
        let mut a = 0i64;
        for (i, &xi) in x.iter().enumerate() {
            a += w[i * out + oo] as i64 * xi as i64;
        }
        acc_out[oo] = a;
    }
}

/// The same with i32 sums, for layers where no sum can overflow (checked by the caller).
#[inline(always)]
pub(crate) fn linear_i32_body(w: &[i32], x: &[i32], acc_out: &mut [i64]) {
    let out = acc_out.len();
    let mut o = 0;
    while o + BLOCK <= out {
        let mut acc = [0i32; BLOCK];
        for (i, &xi) in x.iter().enumerate() {
            let col = &w[i * out + o..i * out + o + BLOCK];
            for k in 0..BLOCK {
                acc[k] = acc[k].wrapping_add(col[k].wrapping_mul(xi));
            }
        }
        for k in 0..BLOCK {
            acc_out[o + k] = acc[k] as i64;
        }
        o += BLOCK;
    }
    for oo in o..out {
        let mut a = 0i32;
        for (i, &xi) in x.iter().enumerate() {
            a = a.wrapping_add(w[i * out + oo].wrapping_mul(xi));
        }
        acc_out[oo] = a as i64;
    }
}

/// Integer dense layer on i16 operands, LinnOS-style, in the pair-packed layout of
/// [`pack_i16_pairs`]: for each block of 8 outputs and each pair of inputs, 16 weights
/// `[w(2p, o0), w(2p+1, o0), w(2p, o1), ...]`. `xp[p]` holds inputs `2p` (low half) and
/// `2p + 1` (high half). Sums are i32 (the caller checks they cannot overflow); the first
/// `acc_out.len()` outputs are written.
#[inline(always)]
pub(crate) fn linear_i16_pairs<const FMA: bool>(packed: &[i16], xp: &[i32], acc_out: &mut [i32]) {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if FMA {
        // SAFETY: `FMA` is true only inside `simd`'s AVX2 + FMA path, after the CPU check.
        return unsafe { avx2::linear_i16_pairs(packed, xp, acc_out) };
    }
    let np = xp.len();
    for (o, a) in acc_out.iter_mut().enumerate() {
        let (blk, k) = (o / 8, o % 8);
        let mut s = 0i32;
        for (p, &pair) in xp.iter().enumerate() {
            let base = (blk * np + p) * 16 + 2 * k;
            let (x0, x1) = (pair as i16, (pair >> 16) as i16);
            s = s.wrapping_add(packed[base] as i32 * x0 as i32 + packed[base + 1] as i32 * x1 as i32);
        }
        *a = s;
    }
}

/// Pack input-major i32 weights (`w[i * out + o]`, all within +-32767) into the layout of
/// [`linear_i16_pairs`]; padding is zero.
pub(crate) fn pack_i16_pairs(w: &[i32], n_in: usize, out: usize) -> alloc::vec::Vec<i16> {
    let (np, nb) = (n_in.div_ceil(2), out.div_ceil(8));
    let mut packed = alloc::vec![0i16; nb * np * 16];
    for o in 0..out {
        for i in 0..n_in {
            let (blk, k, p, j) = (o / 8, o % 8, i / 2, i % 2);
            packed[(blk * np + p) * 16 + 2 * k + j] = w[i * out + o] as i16;
        }
    }
    packed
}

/// Sixteen splits of a tree in QuickScorer's layout (`tree::Scorer`): each split's feature (a
/// lane of the row), threshold, and the leaves of its left subtree (cleared when the row goes
/// right), leaves 0..32 and 32..64. One aligned block is four AVX-512 loads or eight AVX2 loads.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C, align(64))]
pub(crate) struct SplitBlock {
    pub feature: [i32; 16],
    pub threshold: [f32; 16],
    pub left_lo: [u32; 16],
    pub left_hi: [u32; 16],
}

/// For a narrow tree (at most [`NARROW_LEAVES`] leaves, so at most 30 splits): per group j of
/// ten bits of the set R of splits the row goes right at (splits 10j to 10j+9; bit k of R is
/// lane k % 16 of block k / 16), per value of that group, the leaves that no split in it
/// clears (bit i for leaf i, left to right). The AND of the three entries R picks is
/// QuickScorer's mask of surviving leaves. Ten bits a group, not eight: one lookup fewer a row
/// (12 KiB where bytes took 4; see `avx512::tree_leaf_narrow`).
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C, align(64))]
pub(crate) struct Survivors(pub [[u32; 1 << SURVIVOR_BITS]; 3]);

/// Bits of R per [`Survivors`] table.
pub(crate) const SURVIVOR_BITS: usize = 10;

/// The most leaves a narrow tree has: its splits (one fewer) fit the three [`Survivors`]
/// tables.
pub(crate) const NARROW_LEAVES: usize = 3 * SURVIVOR_BITS + 1;

/// Values each of the narrow AVX-512 kernel's two row loads reads from a row of `n` features:
/// four when the row has four or more, else two or one (none for an empty row).
pub(crate) const fn pair_width(n: usize) -> usize {
    match n {
        0 => 0,
        1 => 1,
        2 | 3 => 2,
        _ => 4,
    }
}

/// Where feature `f` of a row of `n` features lands in the narrow AVX-512 kernel's two-source
/// row. The kernel loads the first `w = pair_width(n)` values into lanes 0.. of one register
/// and the last w into the other, which a two-source permute sees as lanes 16..; lanes w..16 of
/// the first are zero. So no load reaches past the row and no mask register is set up for a
/// masked load: moving the row's mask into one took a slot of the port every permute and
/// compare needs, about 8% of a call on KML's tree (docs/benchmarks.md).
pub(crate) const fn pair_lane(f: usize, n: usize) -> i32 {
    let w = pair_width(n);
    if f < w {
        f as i32
    } else {
        (16 + f + w - n) as i32
    }
}

/// A lane of the narrow kernel's two-source row that is always zero: padding splits test it
/// against +inf, so they never go right and R holds the tree's splits only.
pub(crate) const PAIR_ZERO_LANE: i32 = 15;

/// The most blocks of splits a layout holds: 63 splits (64 leaves), sixteen a block.
pub(crate) const MAX_BLOCKS: usize = 4;

/// A tree laid out for the QuickScorer kernels (built by `tree::Scorer`), all of it in one
/// fixed-size value (boxed by its owner): a kernel finds every part at a fixed offset from the
/// one pointer it is given, where parts on the heap of their own cost a call one dependent load
/// each (three of the narrow AVX-512 kernel's fourteen loads, 2026-11-29).
#[derive(Debug, Clone, PartialEq)]
#[repr(C, align(64))]
pub(crate) struct TreeLayout {
    /// The row's lanes to load: the first n (n <= 8) bits set.
    pub row_mask: u16,
    /// Blocks of splits in use (1 to `MAX_BLOCKS`).
    pub n_blocks: usize,
    /// Leaves in the tree (1 to 64).
    pub n_leaves: usize,
    /// The same lanes as `row_mask` as an AVX2 load mask (all ones where loaded).
    pub lanes: [i32; 8],
    /// The splits, sixteen per block, padded with splits that clear nothing; blocks past
    /// `n_blocks` are padding too.
    pub blocks: [SplitBlock; MAX_BLOCKS],
    /// For narrow trees on AVX-512: each split's feature as a lane of the kernel's two-source
    /// row ([`pair_lane`]), sixteen splits a block, padding splits at a lane that is always
    /// zero.
    pub pair_lanes: [[i32; 16]; 2],
    /// For narrow trees: the tables of surviving leaves the AVX-512 kernel looks up (12 KiB;
    /// unused when wide).
    pub survivors: Survivors,
    /// Each leaf, left to right: its node index in the high 32 bits, its class in the low;
    /// padded with the last, so every index a trailing-zero count can give (0 to 64) has one.
    pub leaves: [u64; 65],
}

impl TreeLayout {
    /// More than [`NARROW_LEAVES`] leaves: the narrow kernels' tables do not take the splits
    /// (and past 32 leaves the blocks' `left_hi` words are used).
    pub fn wide(&self) -> bool {
        self.n_leaves > NARROW_LEAVES
    }

    /// The blocks in use.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    pub fn used_blocks(&self) -> &[SplitBlock] {
        &self.blocks[..self.n_blocks]
    }
}

/// A tree kernel: the packed leaf (`TreeLayout::leaves`) row `x` reaches. One pointer to the
/// layout rather than its parts, so a caller's loop passes two arguments, not five.
///
/// # Safety
/// The CPU has the kernel's instructions (it came from [`tree_kernels`] for this layout); `x`
/// points to a value for every lane `row_mask` sets; every block's features are among those
/// lanes; the block count and leaf count are the ones the kernel was chosen for.
pub(crate) type TreeKernel = unsafe fn(x: *const f32, t: &TreeLayout) -> u64;

/// A tree kernel over many rows: the class (the low half of the packed leaf) of row k, which
/// starts at `rows[k * stride]`, into `out[k]`, for every k below `out.len()`. The loop is
/// compiled with the kernel's instructions and the one-row kernel inlined into it, so no call
/// is made per row and the compiler can hoist the layout's loads (blocks, leaf sets) out of the
/// loop (it does for KML's tree: `objdump` of `examples/side_by_side`).
///
/// # Safety
/// As [`TreeKernel`] for every row: `stride` is at least the lanes `row_mask` sets (the row
/// length), and `rows` holds `(out.len() - 1) * stride` values plus one whole row when `out` is
/// not empty.
pub(crate) type TreeRowsKernel = unsafe fn(rows: &[f32], stride: usize, t: &TreeLayout, out: &mut [u32]);

/// One kernel for this CPU and layout, for one row and for many.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TreeKernels {
    /// One row, the packed leaf.
    pub one: TreeKernel,
    /// Many rows, their classes.
    pub rows: TreeRowsKernel,
}

/// The QuickScorer kernels this CPU runs for `t`, fastest first, with their names; empty
/// without AVX2 (the tree is then walked) and for a layout no kernel takes. Chosen once, when
/// the tree is laid out; narrow trees (at most [`NARROW_LEAVES`] leaves, so one or two blocks)
/// get copies with the counts (and on AVX-512 the row's length) fixed, fully unrolled.
pub(crate) fn tree_kernels(t: &TreeLayout) -> alloc::vec::Vec<(&'static str, TreeKernels)> {
    // Without std or off x86-64 no kernel is added.
    #[cfg_attr(not(all(feature = "std", target_arch = "x86_64")), allow(unused_mut))]
    let mut out: alloc::vec::Vec<(&'static str, TreeKernels)> = alloc::vec::Vec::new();
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    {
        let (wide, blocks, leaves) = (t.wide(), t.n_blocks, t.n_leaves);
        let fits = leaves >= 1
            && if wide {
                (NARROW_LEAVES + 1..=64).contains(&leaves) && blocks == (leaves - 1).div_ceil(16)
            } else {
                leaves <= NARROW_LEAVES && blocks == (leaves - 1).div_ceil(16).max(1)
            };
        if !fits {
            return out;
        }
        // BW for the mask unpack that joins two blocks' masks (`kunpckwd`), BMI2 for the
        // one-row narrow kernel's `rorx`.
        let avx512 = std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("bmi1")
            && std::is_x86_feature_detected!("bmi2");
        if avx512 && has_avx2_fma() {
            let n = t.row_mask.count_ones() as usize;
            let kernel = match (wide, blocks) {
                (false, 1) => narrow_avx512::<1>(n),
                (false, 2) => narrow_avx512::<2>(n),
                (true, _) => Some(TreeKernels {
                    one: avx512::tree_leaf_wide,
                    rows: avx512::tree_classes_wide,
                }),
                _ => None,
            };
            out.extend(kernel.map(|k| ("avx512", k)));
        }
        if has_avx2_fma() {
            let kernel = match (wide, blocks) {
                (false, 1) => Some(TreeKernels {
                    one: avx2::tree_leaf::<false, 1>,
                    rows: avx2::tree_classes::<false, 1>,
                }),
                (false, 2) => Some(TreeKernels {
                    one: avx2::tree_leaf::<false, 2>,
                    rows: avx2::tree_classes::<false, 2>,
                }),
                (true, _) => Some(TreeKernels {
                    one: avx2::tree_leaf::<true, 0>,
                    rows: avx2::tree_classes::<true, 0>,
                }),
                _ => None,
            };
            out.extend(kernel.map(|k| ("avx2", k)));
        }
    }
    let _ = t;
    out
}

/// The narrow AVX-512 kernels for `BLOCKS` blocks over rows of `n` features (one copy per
/// count, so the row's two loads have fixed widths and offsets).
#[cfg(all(feature = "std", target_arch = "x86_64"))]
fn narrow_avx512<const BLOCKS: usize>(n: usize) -> Option<TreeKernels> {
    macro_rules! by_features {
        ($($n:literal)*) => {
            match n {
                $($n => Some(TreeKernels {
                    one: avx512::tree_leaf_narrow_call::<BLOCKS, $n>,
                    rows: avx512::tree_classes_narrow::<BLOCKS, $n>,
                }),)*
                _ => None,
            }
        };
    }
    by_features!(0 1 2 3 4 5 6 7 8)
}

/// Whether this CPU has AVX2 and FMA (answer cached by std after the first call).
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[inline(always)]
fn has_avx2_fma() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
}

/// Work to run inside [`simd`]. `run` must be `#[inline(always)]` so it (and the kernels it
/// calls) is compiled into the AVX2 + FMA copy; a closure would not be inlined reliably, and
/// its `mul_add` would then become a slow library call.
pub(crate) trait SimdTask {
    /// What the task returns.
    type Out;
    /// Do the work; `FMA` says whether fused multiply-add may be used.
    fn run<const FMA: bool>(self) -> Self::Out;
}

/// Run `task` inside a function compiled for AVX2 + FMA when the CPU has them, else as is.
#[inline(always)]
pub(crate) fn simd<T: SimdTask>(task: T) -> T::Out {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    {
        if has_avx2_fma() {
            #[target_feature(enable = "avx2,fma")]
            unsafe fn fast<T: SimdTask>(task: T) -> T::Out {
                task.run::<true>()
            }
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            return unsafe { fast(task) };
        }
    }
    task.run::<false>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn exp_approx_is_accurate_everywhere() {
        let mut x = -87.0f32;
        let mut worst = 0.0f64;
        while x < 88.0 {
            let want = (x as f64).exp();
            let got = exp_approx(x) as f64;
            worst = worst.max(((got - want) / want).abs());
            x += 0.0137;
        }
        assert!(worst < 3e-7, "relative error {worst}");
        assert_eq!(exp_approx(-1000.0), exp_approx(-87.3));
        assert!(exp_approx(1000.0).is_finite());
    }

    struct Activate<'a>(Act, &'a [f32], &'a mut [f32]);
    impl SimdTask for Activate<'_> {
        type Out = ();
        #[inline(always)]
        fn run<const FMA: bool>(self) {
            activate_slice::<FMA>(self.0, self.1, self.2)
        }
    }

    #[test]
    fn slice_activations_agree_on_both_builds() {
        let x: Vec<f32> = (0..37).map(|i| i as f32 * 0.7 - 12.0).collect();
        for act in [Act::Identity, Act::Sigmoid, Act::ReLU, Act::Tanh] {
            let (mut a, mut b) = (alloc::vec![0.0; 37], alloc::vec![0.0; 37]);
            simd(Activate(act, &x, &mut a));
            Activate(act, &x, &mut b).run::<false>();
            for (i, (u, v)) in a.iter().zip(&b).enumerate() {
                assert!(
                    (u - v).abs() <= 1e-6 * u.abs().max(1.0),
                    "{act:?} at {}: {u} vs {v}",
                    x[i]
                );
                assert!((u - activate(act, x[i])).abs() <= 1e-6 * u.abs().max(1.0));
            }
        }
    }

    #[test]
    fn activations_match_their_definitions() {
        for i in -400..400 {
            let v = i as f32 * 0.05;
            assert!((activate(Act::Sigmoid, v) - 1.0 / (1.0 + (-v).exp())).abs() < 1e-6);
            assert!((activate(Act::Tanh, v) - v.tanh()).abs() < 1e-6, "{v}");
            assert_eq!(activate(Act::ReLU, v), v.max(0.0));
        }
    }

    struct Dense<'a>(&'a [f32], &'a [f32], &'a [f32], &'a mut [f32], bool);
    impl SimdTask for Dense<'_> {
        type Out = ();
        #[inline(always)]
        fn run<const FMA: bool>(self) {
            if self.4 {
                linear_out_major::<FMA>(self.0, self.1, self.2, self.3, Act::Identity)
            } else {
                linear_in_major::<FMA>(self.0, self.1, self.2, self.3, Act::Identity)
            }
        }
    }

    #[test]
    fn kernels_agree_with_naive_loops() {
        let mut rng = crate::Rng::new(3);
        let shapes = [
            (5, 15),
            (15, 5),
            (5, 4),
            (31, 256),
            (12, 128),
            (128, 16),
            (3, 40),
            (7, 1),
            (256, 2),
            (33, 3),
        ];
        for &(n_in, out) in &shapes {
            let w: Vec<f32> = (0..n_in * out).map(|_| rng.uniform(-1.0, 1.0)).collect();
            let b: Vec<f32> = (0..out).map(|_| rng.uniform(-1.0, 1.0)).collect();
            let x: Vec<f32> = (0..n_in).map(|_| rng.uniform(-2.0, 2.0)).collect();
            for (out_major, portable) in [(false, false), (true, false), (false, true), (true, true)] {
                let mut y = alloc::vec![0.0; out];
                if portable {
                    // The baseline build, which CPUs without AVX2 + FMA run.
                    Dense(&w, &b, &x, &mut y, out_major).run::<false>();
                } else {
                    simd(Dense(&w, &b, &x, &mut y, out_major));
                }
                let wi = |o: usize, i: usize| if out_major { w[o * n_in + i] } else { w[i * out + o] };
                for o in 0..out {
                    let want: f32 = b[o] + (0..n_in).map(|i| wi(o, i) * x[i]).sum::<f32>();
                    assert!(
                        (y[o] - want).abs() < 1e-4,
                        "{n_in}x{out} output {o}: {} vs {want}",
                        y[o]
                    );
                }
            }
            let wi: Vec<i32> = w.iter().map(|v| (v * 1000.0) as i32).collect();
            let xi: Vec<i32> = x.iter().map(|v| (v * 1000.0) as i32).collect();
            let (mut a, mut c) = (alloc::vec![0i64; out], alloc::vec![0i64; out]);
            linear_i64_body(&wi, &xi, &mut a);
            linear_i32_body(&wi, &xi, &mut c);
            for o in 0..out {
                let want: i64 = (0..n_in).map(|i| wi[i * out + o] as i64 * xi[i] as i64).sum();
                assert_eq!(a[o], want);
                assert_eq!(c[o], want);
            }
        }
    }
}
