//! Scalar math that works the same with and without `std` (libm underneath).

#[inline]
pub(crate) fn exp(x: f32) -> f32 {
    // With std, the platform's expf (glibc: a few ns, table driven); without, libm's port.
    #[cfg(feature = "std")]
    return x.exp();
    #[cfg(not(feature = "std"))]
    return libm::expf(x);
}

#[inline]
pub(crate) fn ln(x: f32) -> f32 {
    libm::logf(x)
}

#[inline]
pub(crate) fn sqrt64(x: f64) -> f64 {
    libm::sqrt(x)
}

#[inline]
pub(crate) fn ln64(x: f64) -> f64 {
    libm::log(x)
}

/// `x` rounded half away from zero to an integer, as `roundf` does, for |x| < 2^62; a few
/// instructions instead of libm's bit-twiddling call (the x1000 inference rounds every input).
/// Exact: an f32 plus 0.5 is exact in f64.
#[inline]
pub(crate) fn round_i64(x: f32) -> i64 {
    let x = x as f64;
    if x >= 0.0 {
        (x + 0.5) as i64
    } else {
        (x - 0.5) as i64
    }
}

/// Index of the largest value (first one on ties); 0 for an empty slice.
#[inline]
pub(crate) fn argmax(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best
}

/// Numerically stable softmax of `z` into `out`.
pub(crate) fn softmax(z: &[f32], out: &mut [f32]) {
    let m = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for (o, &x) in out.iter_mut().zip(z) {
        *o = exp(x - m);
        sum += *o;
    }
    for o in out.iter_mut() {
        *o /= sum;
    }
}

/// Whether `v` is a whole number in `[0, limit)`: a valid class index.
#[inline]
pub(crate) fn is_class_index(v: f64, limit: usize) -> bool {
    v >= 0.0 && libm::trunc(v) == v && v < limit as f64
}
