//! The 5-column text of LinnOS and Heimdall: `arrival_ms device offset_bytes size_bytes op`,
//! whitespace separated, op 1 = read, 0 = write (`shared/reference/traces`).

use crate::{field, parse_lines, BlockIo, ReadOptions, Trace, TraceError, MAX_TIME_SECONDS};
use std::fmt::Write;
use std::path::Path;

/// Parse the text of `path`.
pub fn parse(text: &str, path: &Path, opts: ReadOptions) -> Result<Trace, TraceError> {
    parse_lines(text, path, opts, line)
}

/// One line: `Ok(None)` for a comment or blank line; `Err((field, message))`.
pub(crate) fn line(line: &str) -> Result<Option<BlockIo>, (String, String)> {
    let line = line.trim_ascii();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let mut f = line.split_ascii_whitespace();
    let ms: f64 = field(f.next(), "arrival_ms")?;
    if !(ms.is_finite() && (0.0..=MAX_TIME_SECONDS * 1e3).contains(&ms)) {
        return Err((
            "arrival_ms".into(),
            format!("{ms:e} is not a time in ms (0 to {:e})", MAX_TIME_SECONDS * 1e3),
        ));
    }
    let device: u32 = field(f.next(), "device")?;
    let offset: u64 = field(f.next(), "offset_bytes")?;
    let size: u32 = field(f.next(), "size_bytes")?;
    if size == 0 {
        return Err(("size_bytes".into(), "0".into()));
    }
    let write = match field::<u8>(f.next(), "op")? {
        1 => false,
        0 => true,
        v => return Err(("op".into(), format!("{v} (expected 1 = read or 0 = write)"))),
    };
    if f.next().is_some() {
        return Err(("line".into(), "more than 5 columns".into()));
    }
    Ok(Some(BlockIo::new(
        (ms * 1e6).round() as u64,
        device,
        offset,
        size,
        write,
    )))
}

/// One plain line (no trailing newline) the quick way, or `None` for anything [`line`] must
/// look at: a comment, a blank or odd line, a sign, an exponent, more than six decimals, an
/// arrival past 2^51 ns (26 days), a field too long to be sure of. What it returns is exactly
/// what [`line`] returns for the same text (`tests::the_quick_path_agrees_with_the_full_one`):
/// with at most six decimals the arrival is a whole number N of ns, and below 2^51 the float
/// path's two roundings (to the nearest double, then of the product by 1e6) stay within
/// N * 2^-52 < 0.5 of it, so its rounding gives N too. Written by hand for speed: splitting,
/// trimming and the float parse took 96 ns a line, four times the binary form's 24
/// (docs/benchmarks.md, "Streamed replay").
#[inline]
pub(crate) fn quick_line(line: &[u8]) -> Option<BlockIo> {
    let mut at = 0usize;
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let blank = |b: u8| b == b' ' || b == b'\t';
    // The next field: digits (at most `max` of them) after blanks; its value and the byte
    // after it.
    let digits = |at: &mut usize, max: usize| -> Option<u64> {
        while *at < line.len() && blank(line[*at]) {
            *at += 1;
        }
        let start = *at;
        let mut v = 0u64;
        while *at < line.len() && line[*at].is_ascii_digit() {
            v = v * 10 + u64::from(line[*at] - b'0');
            *at += 1;
        }
        let n = *at - start;
        (n > 0 && n <= max).then_some(v)
    };
    // arrival_ms: digits, then optionally '.' and one to six decimals.
    let mut ns = digits(&mut at, 10)? * 1_000_000;
    if line.get(at) == Some(&b'.') {
        at += 1;
        let mut scale = 1_000_000;
        while let Some(&b) = line.get(at).filter(|b| b.is_ascii_digit()) {
            if scale == 1 {
                return None; // a seventh decimal
            }
            scale /= 10;
            ns += u64::from(b - b'0') * scale;
            at += 1;
        }
        if scale == 1_000_000 {
            return None; // no decimal after the point
        }
    }
    if ns >= 1 << 51 || line.get(at).is_some_and(|&b| !blank(b)) {
        return None;
    }
    let device = digits(&mut at, 9)?;
    let offset = digits(&mut at, 18)?;
    let size = digits(&mut at, 9).filter(|&s| s > 0)?;
    let write = match digits(&mut at, 1)? {
        1 => false,
        0 => true,
        _ => return None,
    };
    // Only blanks may follow.
    if line[at..].iter().any(|&b| !blank(b)) {
        return None;
    }
    Some(BlockIo::new(ns, device as u32, offset, size as u32, write))
}

/// The text of `ios` (arrival in ms with 3 decimals, as the reference files).
pub fn write(ios: &[BlockIo]) -> String {
    let mut s = String::with_capacity(ios.len() * 32);
    for io in ios {
        let us = io.arrival_ns.saturating_add(500) / 1000; // rounded to the microsecond
        let _ = writeln!(
            s,
            "{}.{:03} {} {} {} {}",
            us / 1000,
            us % 1000,
            io.device,
            io.offset,
            io.size,
            u8::from(!io.write)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Where the quick path answers, the full one answers the same.
    fn agree(text: &str) -> bool {
        match quick_line(text.as_bytes()) {
            None => false,
            Some(io) => {
                assert_eq!(line(text), Ok(Some(io)), "{text:?}");
                true
            }
        }
    }

    #[test]
    fn the_quick_path_agrees_with_the_full_one() {
        // Lines as the reference files have them, and at the edges of what it takes.
        for (text, quick) in [
            ("0.0 0 0 4096 1", true),
            ("12.345 3 409600 8192 0", true),
            ("7 0 512 512 1", true),
            ("  1.5\t2  3 4 1  \r", true),
            ("1.123456 0 0 1 0", true),
            ("1.1234567 0 0 1 0", false),
            ("2251799813.685247 0 0 1 0", true), // 2^51 - 1 ns
            ("2251799813.685248 0 0 1 0", false),
            ("1. 0 0 1 0", false),
            (".5 0 0 1 0", false),
            ("+1 0 0 1 0", false),
            ("1e3 0 0 1 0", false),
            ("1 0 0 0 1", false),
            ("1 0 0 1 2", false),
            ("1 0 0 1 01", false),
            ("1 0 0 1", false),
            ("1 0 0 1 1 9", false),
            ("# 1 0 0 1 1", false),
            ("", false),
            ("1 0 18446744073709551615 1 1", false),
            ("1 4294967296 0 1 1", false),
            ("1 0 0 1 1\x0b", false),
        ] {
            assert_eq!(agree(text), quick, "{text:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        /// Well-formed lines of every shape: arrivals with 0 to 8 decimals up to past 2^51 ns.
        #[test]
        fn well_formed_lines_agree(ms in 0u64..4_000_000_000, frac in 0u64..100_000_000, decimals in 0usize..9,
                                   dev in 0u32..20, off in any::<u64>(), size in 0u32..1 << 31, op in 0u8..3,
                                   pad in "[ \t]{1,3}") {
            let arrival = if decimals == 0 {
                ms.to_string()
            } else {
                format!("{ms}.{:0width$}", frac % 10u64.pow(decimals as u32), width = decimals)
            };
            let text = format!("{arrival}{pad}{dev}{pad}{}{pad}{size}{pad}{op}", off >> (off % 64));
            agree(&text);
        }

        /// Any text: the quick path never answers what the full one does not.
        #[test]
        fn any_text_agrees(text in "[0-9. \t+e#x\r-]{0,40}") {
            agree(&text);
        }
    }
}
