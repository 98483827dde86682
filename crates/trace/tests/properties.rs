//! Property tests for the trace readers and tools (issue 11): on any text a reader returns a
//! trace or one error naming the file, a line and a field, with a bounded message; what a
//! writer writes reads back; the tools never wrap a time.

use iolearn_trace::tools::{busiest, cut_count, cut_time, is_ordered, rerate, Busy};
use iolearn_trace::{binary, blkparse, linnos, msr, BlockIo, ReadOptions, TraceError, MAX_TIME_SECONDS};
use proptest::prelude::*;
use std::path::Path;

const PATH: &str = "t/x.trace";

/// Tokens that readers meet in real and broken traces: numbers of every size and sign,
/// special floats, the words of each format.
fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u64>().prop_map(|v| v.to_string()),
        any::<u32>().prop_map(|v| v.to_string()),
        (0u32..5).prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| format!("{v:e}")),
        prop::sample::select(vec![
            "-1",
            "0",
            "1",
            "nan",
            "NaN",
            "inf",
            "-inf",
            "1e300",
            "1e-300",
            "1e19",
            "18446744073709551616",
            "Read",
            "Write",
            "read",
            "host",
            "D",
            "C",
            "Q",
            "R",
            "W",
            "WS",
            "RA",
            "+",
            "8,0",
            "4095,1048575",
            "4096,0",
            "[0]",
            "",
            "#",
            "Timestamp",
            "\u{7}",
            "é",
        ])
        .prop_map(str::to_string),
    ]
}

/// A number that is often valid for a column and sometimes just out of range.
fn num() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (0u32..100_000).prop_map(|v| v.to_string()),
        1 => (0.0f64..1e6).prop_map(|v| format!("{v:.3}")),
        1 => token(),
    ]
}

/// Lines shaped like each format's, every field drawn from [`num`] or the format's words.
fn shaped_text() -> impl Strategy<Value = (usize, String)> {
    let linnos = prop::collection::vec(
        (
            num(),
            num(),
            num(),
            num(),
            prop_oneof![Just("1".to_string()), Just("0".to_string()), num()],
        ),
        1..6,
    )
    .prop_map(|l| {
        (
            0,
            l.into_iter()
                .map(|(a, b, c, d, e)| format!("{a} {b} {c} {d} {e}"))
                .collect::<Vec<_>>()
                .join("\n"),
        )
    });
    let msr = prop::collection::vec(
        (
            num(),
            num(),
            prop_oneof![Just("Read".to_string()), Just("Write".to_string()), token()],
            num(),
            num(),
            num(),
        ),
        1..6,
    )
    .prop_map(|l| {
        (
            1,
            l.into_iter()
                .map(|(a, b, c, d, e, f)| format!("{a},host,{b},{c},{d},{e},{f}"))
                .collect::<Vec<_>>()
                .join("\n"),
        )
    });
    let blk = prop::collection::vec(
        (
            num(),
            prop_oneof![Just("D".to_string()), Just("C".to_string())],
            prop_oneof![Just("R".to_string()), Just("W".to_string()), token()],
            num(),
            num(),
        ),
        1..6,
    )
    .prop_map(|l| {
        (
            2,
            l.into_iter()
                .map(|(t, a, rw, sec, n)| format!("  8,0    1   1 {t} 77 {a} {rw} {sec} + {n} [fio]"))
                .collect::<Vec<_>>()
                .join("\n"),
        )
    });
    prop_oneof![linnos, msr, blk]
}

fn line(sep: &'static str) -> impl Strategy<Value = String> {
    prop::collection::vec(token(), 0..12).prop_map(move |t| t.join(sep))
}

fn text(sep: &'static str) -> impl Strategy<Value = String> {
    prop::collection::vec(line(sep), 0..8).prop_map(|l| l.join("\n"))
}

/// An error is about our file, names a line inside the text (or none), and stays short
/// however long the bad line was.
fn check_error(e: &TraceError, text: &str) {
    assert_eq!(e.file, Path::new(PATH));
    assert!(
        e.line <= text.lines().count().max(1),
        "line {} of {}",
        e.line,
        text.lines().count()
    );
    assert!(!e.field.is_empty());
    let shown = e.to_string();
    assert!(shown.len() <= 400, "error of {} bytes: {shown}", shown.len());
    assert!(!shown.contains('\n'), "one line: {shown:?}");
}

/// Every I/O a reader returns is one the rest of iolearn accepts.
fn check_ios(ios: &[BlockIo]) {
    for io in ios {
        assert!(io.size > 0);
        assert!(io.arrival_ns as f64 <= MAX_TIME_SECONDS * 1e9 + 1.0, "{io:?}");
    }
}

/// A text reader: `linnos::parse`, `msr::parse`, `blkparse::parse`.
type Reader = fn(&str, &Path, ReadOptions) -> Result<iolearn_trace::Trace, TraceError>;

fn readers() -> [Reader; 3] {
    [linnos::parse, msr::parse, blkparse::parse]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn readers_return_a_trace_or_one_named_error(
        t in prop_oneof![text(" "), text(","), text("\t")],
        skip_bad in any::<bool>(),
    ) {
        for parse in readers() {
            match parse(&t, Path::new(PATH), ReadOptions { skip_bad }) {
                Ok(trace) => {
                    check_ios(&trace.ios);
                    prop_assert_eq!(trace.skipped > 0, trace.first_error.is_some());
                    if let Some(e) = &trace.first_error {
                        check_error(e, &t);
                    }
                    if !skip_bad {
                        prop_assert_eq!(trace.skipped, 0);
                    }
                }
                Err(e) => {
                    prop_assert!(!skip_bad || e.line == 0 || e.field == "file", "skip_bad failed on {e}");
                    check_error(&e, &t);
                }
            }
        }
    }

    #[test]
    fn shaped_lines_read_in_range_or_fail_by_name((which, t) in shaped_text(), skip_bad in any::<bool>()) {
        match readers()[which](&t, Path::new(PATH), ReadOptions { skip_bad }) {
            Ok(trace) => {
                check_ios(&trace.ios);
                if let Some(e) = &trace.first_error {
                    check_error(e, &t);
                }
            }
            Err(e) => check_error(&e, &t),
        }
    }

    #[test]
    fn a_long_bad_line_is_quoted_by_excerpt(junk in "[a-z0-9.,]{500,3000}") {
        for parse in readers() {
            let t = format!("{junk} {junk}");
            if let Err(e) = parse(&t, Path::new(PATH), ReadOptions::default()) {
                check_error(&e, &t);
            }
        }
    }

    #[test]
    fn linnos_text_reads_back(ios in prop::collection::vec(
        (0u64..(MAX_TIME_SECONDS as u64 * 1_000_000_000), any::<u32>(), any::<u64>(), 1u32.., any::<bool>()), 0..50)
    ) {
        let ios: Vec<BlockIo> = ios.into_iter().map(|(t, d, o, s, w)| BlockIo::new(t, d, o, s, w)).collect();
        let back = linnos::parse(&linnos::write(&ios), Path::new(PATH), ReadOptions::default()).unwrap();
        prop_assert_eq!(back.ios.len(), ios.len());
        for (a, b) in ios.iter().zip(&back.ios) {
            // Written in ms with 3 decimals: the time is kept to the microsecond; floats read
            // back the 17-digit ms value within a few ns.
            prop_assert!(a.arrival_ns.abs_diff(b.arrival_ns) <= 500 + a.arrival_ns / 1_000_000_000_000, "{} vs {}", a.arrival_ns, b.arrival_ns);
            prop_assert_eq!((a.device, a.offset, a.size, a.write), (b.device, b.offset, b.size, b.write));
        }
    }

    #[test]
    fn binary_reads_back_exactly_and_refuses_any_flipped_byte(
        ios in prop::collection::vec((0..=(MAX_TIME_SECONDS * 1e9) as u64, any::<u32>(), any::<u64>(), 1u32.., any::<bool>(), any::<Option<u32>>()), 0..20),
        flip in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let ios: Vec<BlockIo> = ios.into_iter().map(|(t, d, o, s, w, q)| BlockIo { queue_depth: q, ..BlockIo::new(t, d, o, s, w) }).collect();
        let mut bytes = binary::encode(&ios);
        prop_assert_eq!(&binary::decode(&bytes, Path::new(PATH)).unwrap(), &ios);
        let i = flip.index(bytes.len());
        bytes[i] ^= 1 << bit;
        let r = binary::decode(&bytes, Path::new(PATH));
        prop_assert!(r.is_err(), "byte {} bit {} flipped and still read", i, bit);
    }

    #[test]
    fn binary_times_past_the_readers_bound_are_refused(t in (MAX_TIME_SECONDS * 1e9) as u64 + 1..) {
        let bytes = binary::encode(&[BlockIo::new(t, 0, 0, 4096, false)]);
        let e = binary::decode(&bytes, Path::new(PATH)).unwrap_err();
        prop_assert_eq!(e.field, "arrival_ns");
    }

    #[test]
    fn rerate_is_exact_or_refuses(
        times in prop::collection::vec(any::<u64>(), 0..30),
        factor in prop_oneof![any::<f64>(), 1e-6f64..1e6],
    ) {
        let mut times = times;
        times.sort_unstable();
        let ios: Vec<BlockIo> = times.iter().map(|&t| BlockIo::new(t, 0, 0, 4096, false)).collect();
        match rerate(&ios, factor) {
            Ok(out) => {
                prop_assert!(factor.is_finite() && factor > 0.0);
                prop_assert!(is_ordered(&out));
                for (a, b) in ios.iter().zip(&out) {
                    let want = a.arrival_ns as f64 / factor;
                    prop_assert!((b.arrival_ns as f64 - want).abs() <= 1.0 + want * 1e-12);
                }
            }
            Err(_) => {
                let fits = times.iter().all(|&t| (t as f64 / factor).round() < u64::MAX as f64);
                prop_assert!(!(factor.is_finite() && factor > 0.0 && fits));
            }
        }
    }

    #[test]
    fn cuts_keep_a_relative_ordered_subset(
        times in prop::collection::vec(any::<u64>(), 0..30),
        from in any::<u64>(), len in any::<u64>(), skip in any::<usize>(), count in any::<usize>(),
        window in 1u64..,
    ) {
        let mut times = times;
        times.sort_unstable();
        let ios: Vec<BlockIo> = times.iter().map(|&t| BlockIo::new(t, 0, 0, 4096, false)).collect();
        let cut = cut_time(&ios, from, len);
        prop_assert!(cut.len() <= ios.len() && is_ordered(&cut));
        prop_assert!(cut.iter().all(|io| io.arrival_ns < len));
        prop_assert_eq!(cut.len(), times.iter().filter(|&&t| t >= from && t - from < len).count());
        let cut = cut_count(&ios, skip, count);
        prop_assert_eq!(cut.len(), ios.len().saturating_sub(skip).min(count));
        prop_assert!(cut.first().is_none_or(|io| io.arrival_ns == 0) && is_ordered(&cut));
        if let Some((start, amount)) = busiest(&ios, window, Busy::Ios) {
            let at = times.iter().filter(|&&t| t >= start && t - start < window).count() as u64;
            prop_assert_eq!(amount, at);
        } else {
            prop_assert!(ios.is_empty());
        }
    }
}
