//! The record-by-record reader gives what the whole-file reader gives, in every format, bad
//! lines named the same way, and a binary file cut short or altered is an error at its end.

use iolearn_trace::stream::Stream;
use iolearn_trace::{binary, generate, linnos, read_file, Format, ReadOptions};
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("stream");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn both(path: &Path, format: Option<Format>, opts: ReadOptions) {
    let whole = read_file(path, format, opts);
    let mut s = Stream::open(path, format, opts).unwrap();
    let streamed: Result<Vec<_>, _> = s.by_ref().collect();
    match whole {
        Ok(t) => {
            assert_eq!(streamed.unwrap(), t.ios, "{}", path.display());
            assert_eq!(s.skipped(), t.skipped);
            assert_eq!(s.first_error(), t.first_error.as_ref());
        }
        Err(e) => assert_eq!(streamed.unwrap_err(), e, "{}", path.display()),
    }
}

#[test]
fn every_format_streams_as_it_reads_whole() {
    let d = dir();
    let reference = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/reference/traces");
    for name in [
        "msr.cut.per_10k.rw_20_80.105.trace",
        "msr.cut.per_10k.rw_40_60.1370.trace",
    ] {
        both(&reference.join(name), None, ReadOptions::default());
    }
    let ios = generate::generate(&generate::Spec {
        ios: 5000,
        seed: 3,
        ..Default::default()
    })
    .unwrap();
    let text = d.join("g.trace");
    std::fs::write(&text, linnos::write(&ios)).unwrap();
    both(&text, None, ReadOptions::default());
    // Past the stream's 1 MiB buffer (lines across its end take the full parser), with
    // comments, odd spacing and the odd line the quick parser leaves to the full one.
    let mut big = String::new();
    for (k, line) in linnos::write(&ios).lines().cycle().take(120_000).enumerate() {
        big += match k % 1000 {
            7 => "# a comment\n",
            8 => "\n",
            _ => "",
        };
        big += &if k % 977 == 3 {
            format!("  {}\t\r\n", line.replacen(' ', "\t", 2))
        } else {
            format!("{line}\n")
        };
    }
    assert!(big.len() > 3 << 20);
    let text = d.join("big.trace");
    std::fs::write(&text, big).unwrap();
    both(&text, None, ReadOptions::default());
    let bin = d.join("g.iolt");
    std::fs::write(&bin, binary::encode(&ios)).unwrap();
    both(&bin, None, ReadOptions::default());
    let msr = d.join("m.csv");
    std::fs::write(
        &msr,
        "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n\
         128166372003061629,hm,1,Read,7014609920,24576,41286\n\
         128166372016382155,hm,1,Write,1317441536,8192,1963\n",
    )
    .unwrap();
    both(&msr, None, ReadOptions::default());
    let blk = d.join("b.blkparse");
    std::fs::write(
        &blk,
        "  8,0    1        1     0.000000000  4242  Q   R 1000 + 8 [fio]\n\
           8,0    1        2     0.000010000  4242  D   R 1000 + 8 [fio]\n\
           8,0    0        4     0.000110000     0  C   R 1000 + 8 [0]\n",
    )
    .unwrap();
    both(&blk, Some(Format::Blkparse), ReadOptions::default());
}

#[test]
fn bad_lines_are_named_or_skipped_alike() {
    let d = dir();
    let p = d.join("bad.trace");
    std::fs::write(&p, "0 0 0 4096 1\n# c\n1 0 0 4096 7\n2 0 0 4096 0\nxx\n").unwrap();
    both(&p, None, ReadOptions::default());
    both(&p, None, ReadOptions { skip_bad: true });
    let e = Stream::open(&p, None, ReadOptions::default())
        .unwrap()
        .find_map(Result::err)
        .unwrap();
    assert_eq!((e.line, e.field.as_str()), (3, "op"), "{e}");
    let m = d.join("bad.csv");
    std::fs::write(&m, "5,h,1,Read,0,512,1\n4,h,1,Read,0,512,1\n").unwrap();
    both(&m, None, ReadOptions::default());
    let u = d.join("latin1.trace");
    std::fs::write(&u, b"0 0 0 4096 1\n\xff\n").unwrap();
    both(&u, None, ReadOptions::default());
}

#[test]
fn a_binary_trace_cut_short_altered_or_extended_is_an_error() {
    let d = dir();
    let ios = generate::generate(&generate::Spec {
        ios: 100,
        seed: 9,
        ..Default::default()
    })
    .unwrap();
    let good = binary::encode(&ios);
    let mut cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("short", good[..good.len() - 50].to_vec(), "length"),
        ("nocrc", good[..good.len() - 4].to_vec(), "length"),
        ("extra", [good.clone(), vec![0]].concat(), "length"),
        ("header", good[..10].to_vec(), "header"),
    ];
    let mut flipped = good.clone();
    flipped[16 + 40 * 50 + 9] ^= 1; // an offset byte of record 50: parses, but the CRC differs
    cases.push(("flipped", flipped, "checksum"));
    for (name, bytes, field) in cases {
        let p = d.join(format!("{name}.iolt"));
        std::fs::write(&p, &bytes).unwrap();
        let got = Stream::open(&p, None, ReadOptions::default()).and_then(|s| s.collect::<Result<Vec<_>, _>>());
        let e = got.expect_err(name);
        assert_eq!(e.field, field, "{name}: {e}");
        assert!(e.to_string().contains(&format!("{name}.iolt")), "{e}");
    }
}
