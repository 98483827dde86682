//! `iolearn model predict`'s feature-row reader on arbitrary text: rows of the asked width or
//! an error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for width in [1, 5] {
        if let Ok(rows) = iolearn_ml::datasets::parse_rows(text, width) {
            assert_eq!(rows.len() % width, 0);
            assert!(rows.iter().all(|v| v.is_finite()));
        }
    }
});
