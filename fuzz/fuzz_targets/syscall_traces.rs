//! The system-call trace readers on arbitrary bytes: strace text and Parquet give an error or
//! a trace, never a panic; a trace read from strace text writes to Parquet and reads back
//! the same.
#![no_main]
use iolearn_trace::sys::{parquet, strace};
use iolearn_trace::ReadOptions;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let p = Path::new("fuzz");
    let _ = parquet::read_bytes(data.to_vec(), p);
    if let Ok(text) = std::str::from_utf8(data) {
        for skip_bad in [false, true] {
            if let Ok(imp) = strace::parse(text, p, ReadOptions { skip_bad }) {
                let mut out = Vec::new();
                parquet::write(&imp.trace, &mut out).unwrap();
                assert_eq!(parquet::read_bytes(out, p).unwrap(), imp.trace);
            }
        }
    }
});
