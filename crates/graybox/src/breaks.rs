//! Latencies split into classes by Jenks natural breaks (the method the thesis names for the
//! write buffer), through the `natural-breaks` crate.

/// The boundaries of `values` split into `k` classes by natural breaks: the smallest value of
/// each class but the lowest, ascending. None when there are fewer than `k` distinct finite
/// values (nothing to split).
pub fn thresholds(values: &[f64], k: usize) -> Option<Vec<f64>> {
    let mut all: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    all.sort_by(f64::total_cmp);
    let distinct = 1 + all.windows(2).filter(|w| w[0] != w[1]).count();
    if k < 2 || all.is_empty() || distinct < k {
        return None;
    }
    let ranges = natural_breaks::classify_indices(&all, k).ok()?;
    // A boundary inside a run of equal values would put one latency in two classes.
    let mut t: Vec<f64> = ranges[1..].iter().map(|&(s, _)| all[s]).collect();
    t.dedup();
    (t.len() == k - 1).then_some(t)
}

/// The median of `v` (None if empty).
pub fn median(v: &[f64]) -> Option<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_levels_split_between_them() {
        let v = [10.0, 11.0, 10.5, 900.0, 10.2, 950.0, 9.9];
        assert_eq!(thresholds(&v, 2), Some(vec![900.0]));
    }

    #[test]
    fn three_levels_and_too_few_distinct_values() {
        let v = [1.0, 1.0, 5.0, 5.0, 5.0, 20.0, 1.0, 21.0];
        assert_eq!(thresholds(&v, 3), Some(vec![5.0, 20.0]));
        assert_eq!(thresholds(&[3.0, 3.0, 3.0], 2), None);
        assert_eq!(thresholds(&[3.0, 4.0], 3), None);
        assert_eq!(thresholds(&[f64::NAN, 1.0, 2.0], 2), Some(vec![2.0]));
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}
