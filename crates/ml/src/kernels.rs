//! The inner loops of inference: dense layers and activations over slices.
//!
//! Each kernel is written once as plain Rust that the compiler can vectorise and marked
//! `#[inline(always)]`; callers run a whole forward pass inside [`simd`], which compiles it for
//! the baseline target and, with `std` on x86-64, for AVX2 + FMA, chosen at run time
//! (`is_x86_feature_detected!` caches its answer, so the check is a load and a branch).
//! The two builds may differ in the last bit (fused multiply-add rounds once); one machine
//! always takes the same path, so its results are reproducible.

/// Output columns kept in registers at once: 32 f32 = four AVX2 registers.
const BLOCK: usize = 32;

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

/// `y = W x + b` with `W` input-major (`w[i * out + o]`). Outputs are processed in blocks
/// whose partial sums stay in registers across the whole input, so each weight is loaded once
/// and each output written once. A ragged end is handled without a scalar loop: by one more
/// 8-wide block that overlaps the previous one (recomputing a few outputs is cheaper than
/// doing the rest one by one), or, for layers narrower than 8, by a fully unrolled block.
#[inline(always)]
pub(crate) fn linear_f32_body<const FMA: bool>(w: &[f32], b: &[f32], x: &[f32], y: &mut [f32]) {
    let out = b.len();
    debug_assert_eq!(w.len(), x.len() * out);
    let mut o = 0;
    while o + BLOCK <= out {
        block::<BLOCK, FMA>(w, b, x, y, o);
        o += BLOCK;
    }
    while o + 8 <= out {
        block::<8, FMA>(w, b, x, y, o);
        o += 8;
    }
    if o < out {
        match out {
            8.. => block::<8, FMA>(w, b, x, y, out - 8),
            1 => block::<1, FMA>(w, b, x, y, 0),
            2 => block::<2, FMA>(w, b, x, y, 0),
            3 => block::<3, FMA>(w, b, x, y, 0),
            4 => block::<4, FMA>(w, b, x, y, 0),
            5 => block::<5, FMA>(w, b, x, y, 0),
            6 => block::<6, FMA>(w, b, x, y, 0),
            _ => block::<7, FMA>(w, b, x, y, 0),
        }
    }
}

/// Outputs `o..o + N` of a dense layer, sums kept in an `N`-wide register block. Even and odd
/// inputs go to two separate sums, halving the chain of dependent multiply-adds that bounds a
/// small layer's latency.
#[inline(always)]
fn block<const N: usize, const FMA: bool>(
    w: &[f32],
    b: &[f32],
    x: &[f32],
    y: &mut [f32],
    o: usize,
) {
    let out = b.len();
    let mut even = [0.0f32; N];
    let mut odd = [0.0f32; N];
    even.copy_from_slice(&b[o..o + N]);
    let pairs = x.len() / 2;
    for p in 0..pairs {
        let i = 2 * p;
        let c0: &[f32; N] = w[i * out + o..i * out + o + N].try_into().unwrap();
        let c1: &[f32; N] = w[(i + 1) * out + o..(i + 1) * out + o + N]
            .try_into()
            .unwrap();
        let (x0, x1) = (x[i], x[i + 1]);
        for k in 0..N {
            even[k] = madd::<FMA>(c0[k], x0, even[k]);
            odd[k] = madd::<FMA>(c1[k], x1, odd[k]);
        }
    }
    if x.len() % 2 == 1 {
        let i = x.len() - 1;
        let c: &[f32; N] = w[i * out + o..i * out + o + N].try_into().unwrap();
        for k in 0..N {
            even[k] = madd::<FMA>(c[k], x[i], even[k]);
        }
    }
    for k in 0..N {
        y[o + k] = even[k] + odd[k];
    }
}

/// The same in exact integer arithmetic: i32 operands, i64 sums (LinnOS's x1000 network).
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

/// Logistic function over a slice, eight lanes at a time (a short tail goes through a padded
/// block) so every value takes the vector path.
#[inline(always)]
pub(crate) fn sigmoid_body(x: &[f32], y: &mut [f32]) {
    let n = x.len().min(y.len());
    let (x, y) = (&x[..n], &mut y[..n]);
    let (xc, yc) = (x.chunks_exact(8), y.chunks_exact_mut(8));
    let (xt, full) = (xc.remainder(), n / 8 * 8);
    for (xs, ys) in xc.zip(yc) {
        let xs: &[f32; 8] = xs.try_into().unwrap();
        for k in 0..8 {
            ys[k] = 1.0 / (1.0 + exp_approx(-xs[k]));
        }
    }
    if !xt.is_empty() {
        let mut lanes = [0.0f32; 8];
        for (l, &v) in lanes.iter_mut().zip(xt) {
            *l = v;
        }
        for l in lanes.iter_mut() {
            *l = 1.0 / (1.0 + exp_approx(-*l));
        }
        for (o, &l) in y[full..].iter_mut().zip(&lanes) {
            *o = l;
        }
    }
}

/// `e^x` to within 2 ulp over the whole f32 range (clamped to the finite results), written
/// without branches or calls so a loop of it vectorises: `x = n ln2 + r`, `|r| <= ln2/2`,
/// `e^r` by a degree-6 polynomial, `2^n` by building the exponent bits.
#[inline(always)]
pub(crate) fn exp_approx(x: f32) -> f32 {
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let x = x.clamp(-87.3, 88.0);
    // n = round(x / ln 2), by the add-magic-number trick (exact for |n| < 2^22).
    let t = x * core::f32::consts::LOG2_E + 12_582_912.0;
    let n = t - 12_582_912.0;
    // t's low mantissa bits hold n as an integer: no float-to-int conversion needed.
    let n_int = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    let r = (x - n * LN2_HI) - n * LN2_LO;
    // Minimax-quality Taylor-like coefficients of e^r on [-ln2/2, ln2/2].
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (0.166_666_67 + r * (0.041_666_5 + r * (0.008_333_78 + r * 0.001_394_4)))));
    let bits = (n_int.wrapping_add(127) as u32) << 23;
    p * f32::from_bits(bits)
}

/// Whether this CPU has AVX2 and FMA (answer cached by std after the first call).
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[inline(always)]
fn has_avx2_fma() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
}

/// Work to run inside [`simd`]. `run` must be `#[inline(always)]` so it (and the kernel bodies
/// it calls) is compiled into the AVX2 copy; a closure would not be inlined reliably,
/// and its `mul_add` would then become a slow library call.
pub(crate) trait SimdTask {
    /// What the task returns.
    type Out;
    /// Do the work; `FMA` says whether fused multiply-add may be used.
    fn run<const FMA: bool>(self) -> Self::Out;
}

/// Run `task` inside a function compiled for AVX2 when the CPU has them, else as is. A
/// whole forward pass written as one task is compiled once per instruction set and pays one
/// check, not one per layer.
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

    #[test]
    fn kernels_agree_with_naive_loops() {
        let mut rng = crate::Rng::new(3);
        for &(n_in, out) in &[
            (5usize, 15usize),
            (15, 5),
            (5, 4),
            (31, 256),
            (12, 128),
            (128, 16),
            (3, 40),
            (7, 1),
        ] {
            let w: alloc::vec::Vec<f32> = (0..n_in * out).map(|_| rng.uniform(-1.0, 1.0)).collect();
            let b: alloc::vec::Vec<f32> = (0..out).map(|_| rng.uniform(-1.0, 1.0)).collect();
            let x: alloc::vec::Vec<f32> = (0..n_in).map(|_| rng.uniform(-2.0, 2.0)).collect();
            let mut y = alloc::vec![0.0; out];
            struct F<'a>(&'a [f32], &'a [f32], &'a [f32], &'a mut [f32]);
            impl SimdTask for F<'_> {
                type Out = ();
                #[inline(always)]
                fn run<const FMA: bool>(self) {
                    linear_f32_body::<FMA>(self.0, self.1, self.2, self.3)
                }
            }
            simd(F(&w, &b, &x, &mut y));
            for o in 0..out {
                let want: f32 = b[o] + (0..n_in).map(|i| w[i * out + o] * x[i]).sum::<f32>();
                assert!(
                    (y[o] - want).abs() < 1e-4,
                    "{n_in}x{out} output {o}: {} vs {want}",
                    y[o]
                );
            }
            let wi: alloc::vec::Vec<i32> = w.iter().map(|v| (v * 1000.0) as i32).collect();
            let xi: alloc::vec::Vec<i32> = x.iter().map(|v| (v * 1000.0) as i32).collect();
            let (mut a, mut c) = (alloc::vec![0i64; out], alloc::vec![0i64; out]);
            linear_i64_body(&wi, &xi, &mut a);
            linear_i32_body(&wi, &xi, &mut c);
            for o in 0..out {
                let want: i64 = (0..n_in)
                    .map(|i| wi[i * out + o] as i64 * xi[i] as i64)
                    .sum();
                assert_eq!(a[o], want);
                assert_eq!(c[o], want);
            }
        }
    }
}
