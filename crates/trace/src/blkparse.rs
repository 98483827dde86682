//! `blkparse` default text output: `maj,min cpu seq time pid action rwbs sector + blocks [proc]`.
//! Each `D` (issued to the driver) line is an I/O; a later `C` (completed) line for the same
//! device and sector gives its latency. Sectors are 512 bytes. Other actions are ignored.

use crate::{field, parse_lines_into, BlockIo, ReadOptions, Trace, TraceError};
use std::collections::HashMap;
use std::path::Path;

/// Parse the text of `path`.
pub fn parse(text: &str, path: &Path, opts: ReadOptions) -> Result<Trace, TraceError> {
    let mut pending: HashMap<(u32, u64), usize> = HashMap::new();
    let mut t0: Option<u64> = None;
    parse_lines_into(text, path, opts, |line, t| {
        let Some((action, dev, time_ns, offset, size, write)) = parse_line(line)? else {
            return Ok(());
        };
        let rel = time_ns.saturating_sub(*t0.get_or_insert(time_ns));
        match action {
            'D' => {
                pending.insert((dev, offset), t.ios.len());
                t.ios.push(BlockIo::new(rel, dev, offset, size, write));
            }
            'C' => {
                if let Some(ix) = pending.remove(&(dev, offset)) {
                    let io = &mut t.ios[ix];
                    io.latency_ns = Some(rel.saturating_sub(io.arrival_ns));
                }
            }
            _ => {}
        }
        Ok(())
    })
}

/// (action, device, time ns, offset bytes, size bytes, write)
type Parsed = (char, u32, u64, u64, u32, bool);

fn parse_line(line: &str) -> Result<Option<Parsed>, (String, String)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    // Summary lines ("CPU0 (...)", "Total (...)", "Reads Queued: ...") are not events.
    if f.len() < 7 || !f[0].contains(',') || !f[0].as_bytes()[0].is_ascii_digit() {
        return Ok(None);
    }
    let (maj, min) = f[0].split_once(',').unwrap();
    let maj: u32 = field(Some(maj), "major")?;
    let min: u32 = field(Some(min), "minor")?;
    let secs: f64 = field(Some(f[3]), "time")?;
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(("time".into(), format!("{secs} is not a time")));
    }
    let action = f[5].chars().next().unwrap_or('?');
    if action != 'D' && action != 'C' {
        return Ok(None);
    }
    let rwbs = f[6];
    if !rwbs.contains('R') && !rwbs.contains('W') {
        return Ok(None); // flushes, discards without data
    }
    if f.len() < 10 || f[8] != "+" {
        return Ok(None); // no sector range (e.g. a flush completion)
    }
    let sector: u64 = field(Some(f[7]), "sector")?;
    let blocks: u32 = field(Some(f[9]), "blocks")?;
    let offset = sector
        .checked_mul(512)
        .ok_or(("sector".to_string(), format!("{sector} is beyond 2^64 bytes")))?;
    let size = blocks
        .checked_mul(512)
        .ok_or(("blocks".to_string(), format!("{blocks} sectors is over 4 GiB")))?;
    let dev = (maj << 20) | (min & 0xfffff);
    Ok(Some((
        action,
        dev,
        (secs * 1e9).round() as u64,
        offset,
        size,
        rwbs.contains('W'),
    )))
}
