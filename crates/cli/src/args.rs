//! Value parsers for numeric options: every number from the command line is checked into a
//! range before any `as` cast or `Duration` sees it, and a bad one is an error that names the
//! option (clap adds `for '--interval <INTERVAL>'`).

use std::ops::RangeInclusive;

/// The longest time an option may name: a year. Longer runs are not what anyone means, and
/// every time in nanoseconds then fits a `u64` with room to add.
pub const MAX_SECONDS: f64 = 365.0 * 86400.0;

fn number(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("{s:?} is not a number"))?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(format!("{} is not a finite number", iolearn_safeio::excerpt(s, 40)))
    }
}

fn within(v: f64, range: RangeInclusive<f64>, what: &str) -> Result<f64, String> {
    if range.contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "must be {what} from {} to {}, got {v:?}",
            range.start(),
            range.end()
        ))
    }
}

/// Any finite number (the caller checks its range and names the field).
pub fn finite(s: &str) -> Result<f64, String> {
    number(s)
}

/// A positive number of seconds, at most [`MAX_SECONDS`] (intervals, durations, windows).
pub fn seconds(s: &str) -> Result<f64, String> {
    let v = number(s)?;
    if v <= 0.0 {
        return Err(format!("must be a positive number of seconds, got {v:?}"));
    }
    within(v, 1e-6..=MAX_SECONDS, "a number of seconds")
}

/// A decision or sampling window: 10 ms to an hour (shorter windows would only spin the CPU:
/// a window of the tuner costs a probe read and a decision).
pub fn window(s: &str) -> Result<f64, String> {
    let v = number(s)?;
    within(v, 0.01..=3600.0, "a window in seconds")
}

/// Zero or more seconds, at most [`MAX_SECONDS`] (offsets into a trace).
pub fn offset_seconds(s: &str) -> Result<f64, String> {
    within(number(s)?, 0.0..=MAX_SECONDS, "a number of seconds")
}

/// A rate or intensity factor (2: twice as fast), from 1e-6 to 1e6: beyond, times in
/// nanoseconds would overflow or every I/O would land in one nanosecond.
pub fn factor(s: &str) -> Result<f64, String> {
    let v = number(s)?;
    if v <= 0.0 {
        return Err(format!("must be a positive factor, got {v:?}"));
    }
    within(v, 1e-6..=1e6, "a factor")
}

/// A share of time, strictly between 0 and 1 (and not so close to either that the other
/// part is less than a millionth).
pub fn share(s: &str) -> Result<f64, String> {
    within(number(s)?, 1e-6..=1.0 - 1e-6, "a share")
}

/// A share of a window to observe, from a thousandth to all of it.
pub fn observed_share(s: &str) -> Result<f64, String> {
    within(number(s)?, 1e-3..=1.0, "a share of the window")
}

/// Microseconds, from 0 to one hour.
pub fn microseconds(s: &str) -> Result<f64, String> {
    within(number(s)?, 0.0..=3.6e9, "a number of microseconds")
}

/// Random overwrites of a drive, times its capacity: 0 to 10 (10 is far past steady state;
/// more would only run for minutes).
pub fn overwrites(s: &str) -> Result<f64, String> {
    within(number(s)?, 0.0..=10.0, "a number of drive writes")
}

/// A `usize` in `range`, for counts that size threads, queues or allocations.
pub fn count(range: RangeInclusive<usize>) -> impl Fn(&str) -> Result<usize, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let v: usize = s.trim().parse().map_err(|_| format!("{s:?} is not a whole number"))?;
        if range.contains(&v) {
            Ok(v)
        } else {
            Err(format!("must be from {} to {}, got {v}", range.start(), range.end()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_numbers_are_refused_with_the_range() {
        for bad in [
            "-1", "0", "nan", "NaN", "inf", "-inf", "1e300", "1e-300", "", "x", "1e400",
        ] {
            assert!(seconds(bad).is_err(), "{bad}");
            assert!(factor(bad).is_err(), "{bad}");
        }
        assert_eq!(seconds("0.25"), Ok(0.25));
        assert_eq!(offset_seconds("0"), Ok(0.0));
        assert!(offset_seconds("1e11").unwrap_err().contains("31536000"));
        assert!(share("1").is_err() && share("0").is_err() && share("0.5").is_ok());
        assert!(microseconds("-0.5").is_err() && microseconds("15").is_ok());
        let threads = count(0..=64);
        assert!(threads("100000").unwrap_err().contains("0 to 64"));
        assert!(threads("-1").is_err() && threads("1.5").is_err());
        assert_eq!(threads("8"), Ok(8));
    }

    use proptest::prelude::*;

    /// Text a user might type for a number: any float in any notation, integers, junk.
    fn typed() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<f64>().prop_map(|v| v.to_string()),
            any::<f64>().prop_map(|v| format!("{v:e}")),
            any::<i64>().prop_map(|v| v.to_string()),
            any::<u128>().prop_map(|v| v.to_string()),
            "[ -~]{0,12}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// Every parser returns a finite value inside its range, one that survives the casts
        /// the commands make (seconds to nanoseconds in a u64), or an error that says why.
        #[test]
        fn parsed_numbers_are_finite_and_in_range(s in typed()) {
            type Parser = fn(&str) -> Result<f64, String>;
            let parsers: [(Parser, f64, f64); 6] = [
                (seconds, 1e-6, MAX_SECONDS),
                (window, 0.01, 3600.0),
                (offset_seconds, 0.0, MAX_SECONDS),
                (factor, 1e-6, 1e6),
                (share, 1e-6, 1.0 - 1e-6),
                (microseconds, 0.0, 3.6e9),
            ];
            for (parse, lo, hi) in parsers {
                match parse(&s) {
                    Ok(v) => {
                        prop_assert!(v.is_finite() && v >= lo && v <= hi, "{s:?} gave {v}");
                        prop_assert_eq!(v, s.trim().parse::<f64>().unwrap());
                        prop_assert!(v * 1e9 < u64::MAX as f64);
                    }
                    Err(e) => {
                        prop_assert!(!e.is_empty() && !e.contains('\n'));
                        let in_range = s.trim().parse::<f64>().is_ok_and(|v| v.is_finite() && v >= lo && v <= hi && (v > 0.0 || lo == 0.0));
                        prop_assert!(!in_range, "{s:?} refused: {e}");
                    }
                }
            }
            let threads = count(1..=64);
            match threads(&s) {
                Ok(n) => prop_assert!((1..=64).contains(&n)),
                Err(e) => prop_assert!(s.trim().parse::<usize>().map_or(true, |n| !(1..=64).contains(&n)), "{e}"),
            }
        }
    }
}
