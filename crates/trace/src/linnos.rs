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
