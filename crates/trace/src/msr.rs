//! MSR Cambridge traces (SNIA IOTTA): `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`,
//! timestamps and response times in Windows filetime ticks (100 ns), type `Read` or `Write`.
//! Arrivals are made relative to the first record.

use crate::{field, parse_lines, BlockIo, ReadOptions, Trace, TraceError};
use std::path::Path;

/// Parse the text of `path`.
pub fn parse(text: &str, path: &Path, opts: ReadOptions) -> Result<Trace, TraceError> {
    let mut lines = Lines::default();
    parse_lines(text, path, opts, |line| lines.line(line))
}

/// The line parser (arrivals are relative to the first record, so it keeps that record's time).
#[derive(Debug, Default)]
pub(crate) struct Lines {
    first: Option<u64>,
}

impl Lines {
    /// One line: `Ok(None)` for a header, comment or blank line; `Err((field, message))`.
    pub(crate) fn line(&mut self, line: &str) -> Result<Option<BlockIo>, (String, String)> {
        let line = line.trim_ascii();
        if line.is_empty() || line.starts_with('#') || line.starts_with("Timestamp") {
            return Ok(None);
        }
        let mut f = line.split(',');
        let ticks: u64 = field(f.next(), "Timestamp")?;
        let _host = f.next().ok_or(("Hostname".to_string(), "missing".to_string()))?;
        let device: u32 = field(f.next(), "DiskNumber")?;
        let write = match f.next().map(str::trim) {
            Some(t) if t.eq_ignore_ascii_case("read") => false,
            Some(t) if t.eq_ignore_ascii_case("write") => true,
            Some(t) => {
                let t = iolearn_safeio::excerpt(t, 24);
                return Err(("Type".into(), format!("{t} (expected Read or Write)")));
            }
            None => return Err(("Type".into(), "missing".into())),
        };
        let offset: u64 = field(f.next(), "Offset")?;
        let size: u32 = field(f.next(), "Size")?;
        if size == 0 {
            return Err(("Size".into(), "0".into()));
        }
        let response: Option<u64> = match f.next() {
            Some(v) if !v.trim().is_empty() => Some(field(Some(v), "ResponseTime")?),
            _ => None,
        };
        if let Some(extra) = f.next() {
            let extra = iolearn_safeio::excerpt(extra, 24);
            return Err(("line".into(), format!("an 8th column ({extra}); MSR traces have 7")));
        }
        let t0 = *self.first.get_or_insert(ticks);
        if ticks < t0 {
            return Err(("Timestamp".into(), format!("{ticks} is before the first record's {t0}")));
        }
        let arrival = (ticks - t0).checked_mul(100).ok_or((
            "Timestamp".to_string(),
            format!("{ticks} is too far after the first record"),
        ))?;
        let mut io = BlockIo::new(arrival, device, offset, size, write);
        io.latency_ns = match response {
            Some(r) => Some(
                r.checked_mul(100)
                    .ok_or(("ResponseTime".to_string(), format!("{r} is too large")))?,
            ),
            None => None,
        };
        Ok(Some(io))
    }
}
