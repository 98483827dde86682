//! Trace formats and stats (issue 5, must-show 1: the reference traces import and their stats
//! match the `.stats` files Heimdall's tools printed).

use iolearn_trace::stats::TraceStats;
use iolearn_trace::tools::{busiest, cut_count, cut_time, is_ordered, rerate, Busy};
use iolearn_trace::{binary, linnos, read_file, BlockIo, Format, ReadOptions};
use std::path::{Path, PathBuf};

fn reference(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/reference/traces")
        .join(name)
}

const TRACES: [&str; 2] = ["msr.cut.per_10k.rw_20_80.105", "msr.cut.per_10k.rw_40_60.1370"];

#[test]
fn reference_traces_match_their_stats_files() {
    for name in TRACES {
        let t = read_file(
            &reference(&format!("{name}.trace")),
            Some(Format::Linnos),
            ReadOptions::default(),
        )
        .unwrap();
        assert_eq!(t.ios.len(), 10_000);
        assert!(is_ordered(&t.ios));
        let want = std::fs::read_to_string(reference(&format!("{name}.stats"))).unwrap();
        let got = TraceStats::of(&t.ios).render("x");
        // Every line after the first (the original's path) is identical.
        let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().skip(1).collect(), got.lines().skip(1).collect());
        assert_eq!(w.len(), g.len(), "{got}");
        for (a, b) in w.iter().zip(&g) {
            assert_eq!(a, b, "{name}:\nwant {a}\ngot  {b}");
        }
    }
}

#[test]
fn linnos_text_and_binary_round_trip() {
    let t = read_file(
        &reference(&format!("{}.trace", TRACES[0])),
        None,
        ReadOptions::default(),
    )
    .unwrap();
    let text = linnos::write(&t.ios);
    let back = linnos::parse(&text, Path::new("mem"), ReadOptions::default()).unwrap();
    assert_eq!(back.ios, t.ios);
    let mut ios = t.ios.clone();
    ios[3].latency_ns = Some(123_456);
    ios[4].queue_depth = Some(7);
    let b = binary::encode(&ios);
    assert_eq!(binary::decode(&b, Path::new("mem")).unwrap(), ios);
    // Every truncation and every flipped byte is an error, never a panic or wrong data.
    for n in [0, 3, 15, 16, b.len() - 1] {
        assert!(binary::decode(&b[..n], Path::new("t.iolt")).is_err());
    }
    for i in (0..b.len()).step_by(997) {
        let mut c = b.clone();
        c[i] ^= 0x40;
        let e = binary::decode(&c, Path::new("t.iolt")).unwrap_err().to_string();
        assert!(e.contains("t.iolt"), "{e}");
    }
}

#[test]
fn bad_lines_name_file_line_and_field_or_are_skipped() {
    let p = Path::new("bad.trace");
    for (text, line, field) in [
        ("0.0 0 0 4096 1\n1.0 0 x 4096 1\n", 2, "offset_bytes"),
        ("0.0 0 0 4096 7\n", 1, "op"),
        ("0.0 0 0 0 1\n", 1, "size_bytes"),
        ("-1 0 0 4096 1\n", 1, "arrival_ms"),
        ("0.0 0 0 4096\n", 1, "op"),
        ("0.0 0 0 4096 1 9\n", 1, "line"),
        ("nan 0 0 4096 1\n", 1, "arrival_ms"),
    ] {
        let e = linnos::parse(text, p, ReadOptions::default()).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (line, field), "{e}");
        assert!(e.to_string().starts_with("bad.trace: line"), "{e}");
    }
    let t = linnos::parse("0 0 0 4096 1\nbad\n1 0 0 4096 0\n", p, ReadOptions { skip_bad: true }).unwrap();
    assert_eq!((t.ios.len(), t.skipped), (2, 1));
    assert_eq!(t.first_error.unwrap().line, 2);
}

#[test]
fn msr_csv_and_blkparse_are_read() {
    let msr = "128166372003061629,hm,1,Read,7014609920,24576,41286\n\
               128166372016382155,hm,1,Write,1317441536,8192,1963\n";
    let t = iolearn_trace::msr::parse(msr, Path::new("hm_1.csv"), ReadOptions::default()).unwrap();
    assert_eq!(t.ios.len(), 2);
    assert_eq!(
        t.ios[0],
        BlockIo {
            latency_ns: Some(4_128_600),
            ..BlockIo::new(0, 1, 7014609920, 24576, false)
        }
    );
    assert_eq!(t.ios[1].arrival_ns, (128166372016382155 - 128166372003061629) * 100);
    assert!(t.ios[1].write);
    let e =
        iolearn_trace::msr::parse("1,hm,1,Erase,0,512,1\n", Path::new("x.csv"), ReadOptions::default()).unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (1, "Type"));

    let blk = "  8,0    1        1     0.000000000  4242  Q   R 1000 + 8 [fio]\n\
                 8,0    1        2     0.000010000  4242  D   R 1000 + 8 [fio]\n\
                 8,0    1        3     0.000020000  4242  D  WS 2000 + 16 [fio]\n\
                 8,0    0        4     0.000110000     0  C   R 1000 + 8 [0]\n\
                 8,0    0        5     0.000520000     0  C  WS 2000 + 16 [0]\n\
               CPU0 (8,0):\n Reads Queued:           1,        4KiB\n";
    let t = iolearn_trace::blkparse::parse(blk, Path::new("b.txt"), ReadOptions::default()).unwrap();
    assert_eq!(t.ios.len(), 2);
    assert_eq!((t.ios[0].offset, t.ios[0].size, t.ios[0].write), (512_000, 4096, false));
    assert_eq!(t.ios[0].latency_ns, Some(100_000));
    assert_eq!(
        (t.ios[1].size, t.ios[1].write, t.ios[1].latency_ns),
        (8192, true, Some(500_000))
    );
    let e = iolearn_trace::blkparse::parse(
        "  8,0 1 1 zz 1 D R 10 + 8 [x]\n",
        Path::new("b.txt"),
        ReadOptions::default(),
    )
    .unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (1, "time"));
}

#[test]
fn tools_cut_find_the_busiest_window_and_rerate() {
    let ios: Vec<BlockIo> = [0u64, 10, 20, 1000, 1001, 1002, 1003, 5000]
        .iter()
        .map(|&ms| BlockIo::new(ms * 1_000_000, 0, 0, 4096, false))
        .collect();
    let (start, n) = busiest(&ios, 100_000_000, Busy::Ios).unwrap();
    assert_eq!((start, n), (1_000_000_000, 4));
    assert_eq!(busiest(&ios, 100_000_000, Busy::Bytes).unwrap().1, 4 * 4096);
    let c = cut_time(&ios, 1_000_000_000, 100_000_000);
    assert_eq!(c.len(), 4);
    assert_eq!(c[0].arrival_ns, 0);
    assert_eq!(
        cut_count(&ios, 3, 2).iter().map(|i| i.arrival_ns).collect::<Vec<_>>(),
        [0, 1_000_000]
    );
    let r = rerate(&ios, 2.0).unwrap();
    assert!(rerate(&ios, 0.0).is_err() && rerate(&ios, f64::NAN).is_err());
    assert!(rerate(&[BlockIo::new(u64::MAX / 2, 0, 0, 512, false)], 1e-3).is_err());
    assert_eq!(r[7].arrival_ns, 2_500_000_000);
    let s = TraceStats::of(&r);
    assert_eq!(s.duration_s, 2);
}

#[test]
fn text_times_round_to_the_microsecond_without_going_back() {
    let ios = [
        BlockIo::new(1_999_600, 0, 0, 512, false),
        BlockIo::new(2_000_400, 0, 0, 512, true),
    ];
    let text = linnos::write(&ios);
    assert_eq!(text, "2.000 0 0 512 1\n2.000 0 0 512 0\n");
    let back = linnos::parse(&text, Path::new("m"), ReadOptions::default()).unwrap();
    assert!(is_ordered(&back.ios));
}

#[test]
fn huge_numbers_are_errors_not_overflows() {
    // Found by the fuzzer: sector and block counts whose byte values overflow.
    let p = Path::new("b.txt");
    let e = iolearn_trace::blkparse::parse(
        "8,0 1 1 0.1 1 D R 99999999999999999 + 8 [x]\n",
        p,
        ReadOptions::default(),
    )
    .unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (1, "sector"));
    let e = iolearn_trace::blkparse::parse("8,0 1 1 0.1 1 D R 10 + 4294967295 [x]\n", p, ReadOptions::default())
        .unwrap_err();
    assert_eq!(e.field, "blocks");
    let m = "1,h,1,Read,0,512,1\n18446744073709551615,h,1,Read,0,512,1\n";
    let e = iolearn_trace::msr::parse(m, Path::new("m.csv"), ReadOptions::default()).unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (2, "Timestamp"));
    let e = iolearn_trace::msr::parse(
        "1,h,1,Read,0,512,18446744073709551615\n",
        Path::new("m.csv"),
        ReadOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.field, "ResponseTime");
}

#[test]
fn readers_refuse_what_they_used_to_accept_silently() {
    // Issue 11: an MSR file read as blkparse gave 0 I/Os and exit 0; unsorted times became 0;
    // zero-sized I/Os were accepted; extra MSR columns were accepted; device numbers collided.
    let p = Path::new("b.txt");
    let blk = |text: &str| iolearn_trace::blkparse::parse(text, p, ReadOptions::default());
    let msr_text = "128166372003061629,hm,1,Read,7014609920,24576,41286\n";
    let e = blk(msr_text).unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (1, "line"), "{e}");
    assert!(e.to_string().contains("not a blkparse event"), "{e}");
    let e = blk("8,0 1 1 0.5 1 D R 10 + 8 [x]\n8,0 1 2 0.1 1 D R 20 + 8 [x]\n").unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (2, "time"), "{e}");
    let e = blk("8,0 1 1 0.5 1 D R 10 + 0 [x]\n").unwrap_err();
    assert_eq!(e.field, "blocks", "{e}");
    let e = blk("4096,0 1 1 0.5 1 D R 10 + 8 [x]\n").unwrap_err();
    assert_eq!(e.field, "device", "{e}");
    let e = blk("8,0 1 1 0.5 1 Q R 10 + 8 [x]\n8,0 1 2 0.6 1 G R 10 + 8 [x]\n").unwrap_err();
    assert!(e.to_string().contains("no I/O issued"), "{e}");
    let e = blk("8,0 1 1 1e300 1 D R 10 + 8 [x]\n").unwrap_err();
    assert_eq!(e.field, "time", "{e}");
    // Garbage between events is an error; the summary after the events is not.
    let e = blk("8,0 1 1 0.5 1 D R 10 + 8 [x]\nhello\n8,0 1 2 0.6 1 D R 20 + 8 [x]\n").unwrap_err();
    assert_eq!(e.line, 2, "{e}");
    let t = blk("8,0 1 1 0.5 1 D R 10 + 8 [x]\n\nCPU0 (8,0):\n Reads Queued: 1, 4KiB\nTotal (8,0):\n").unwrap();
    assert_eq!(t.ios.len(), 1);
    // With --skip-bad the garbage is counted, not silently dropped.
    let t = iolearn_trace::blkparse::parse(
        "8,0 1 1 0.5 1 D R 10 + 8 [x]\nhello\n",
        p,
        ReadOptions { skip_bad: true },
    )
    .unwrap();
    assert_eq!((t.ios.len(), t.skipped), (1, 1));
    let e = iolearn_trace::msr::parse(
        "128166372003061629,hm,1,Read,7014609920,24576,41286,extra\n",
        Path::new("m.csv"),
        ReadOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("8th column"), "{e}");
    // A 2 MB field is quoted as a bounded excerpt.
    let long = format!("1,h,1,{},0,512,1\n", "R".repeat(2 << 20));
    let e = iolearn_trace::msr::parse(&long, Path::new("m.csv"), ReadOptions::default()).unwrap_err();
    assert!(e.to_string().len() < 200, "{} bytes", e.to_string().len());
}
