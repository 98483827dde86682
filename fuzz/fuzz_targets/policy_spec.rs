//! Admission policy strings (`ADMISSION[+CLIENT][+rank][+cache]`) on arbitrary text: a parse
//! or an error of bounded length, never a panic.
#![no_main]
use iolearn_tail::PolicySpec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Err(e) = PolicySpec::parse(text) {
        assert!(e.len() < 1000, "an error of {} bytes", e.len());
    }
});
