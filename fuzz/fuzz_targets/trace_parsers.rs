//! Every trace reader on arbitrary bytes: an error or a trace, never a panic; a parsed
//! binary trace re-encodes to the same bytes.
#![no_main]
use iolearn_trace::{binary, blkparse, linnos, msr, ReadOptions};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let p = Path::new("fuzz");
    if let Ok(ios) = binary::decode(data, p) {
        assert_eq!(binary::encode(&ios), data);
    }
    if let Ok(text) = std::str::from_utf8(data) {
        for skip_bad in [false, true] {
            let o = ReadOptions { skip_bad };
            if let Ok(t) = linnos::parse(text, p, o) {
                // What was read writes back and reads again as the same I/Os (ms precision).
                let again = linnos::parse(&linnos::write(&t.ios), p, ReadOptions::default()).unwrap();
                assert_eq!(again.ios.len(), t.ios.len());
            }
            let _ = msr::parse(text, p, o);
            let _ = blkparse::parse(text, p, o);
        }
    }
});
