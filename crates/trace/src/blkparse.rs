//! `blkparse` default text output: `maj,min cpu seq time pid action rwbs sector + blocks [proc]`.
//! Each `D` (issued to the driver) line is an I/O; a later `C` (completed) line for the same
//! device and sector gives its latency. Sectors are 512 bytes. Other actions are ignored, and
//! so is the summary blkparse prints at the end (from a `CPU...` or `Total...` line on); any
//! other line that is not an event is an error, so text in another format is never read as an
//! empty trace.

use crate::{field, parse_lines_into, BlockIo, ReadOptions, Trace, TraceError, MAX_TIME_SECONDS};
use std::collections::HashMap;
use std::path::Path;

/// Parse the text of `path`.
pub fn parse(text: &str, path: &Path, opts: ReadOptions) -> Result<Trace, TraceError> {
    let mut pending: HashMap<(u32, u64), usize> = HashMap::new();
    let mut t0: Option<u64> = None;
    let mut summary = false;
    let mut events = 0usize;
    let trace = parse_lines_into(text, path, opts, |line, t| {
        if summary || line.trim().is_empty() {
            return Ok(());
        }
        if !is_event(line) {
            let head = line.trim_start();
            if events > 0 && (head.starts_with("CPU") || head.starts_with("Total")) {
                summary = true;
                return Ok(());
            }
            let shown = iolearn_safeio::excerpt(line.trim(), 40);
            return Err((
                "line".into(),
                format!("{shown} is not a blkparse event (MAJ,MIN CPU SEQ TIME ...)"),
            ));
        }
        events += 1;
        let Some((action, dev, time_ns, offset, size, write)) = parse_line(line)? else {
            return Ok(());
        };
        let first = *t0.get_or_insert(time_ns);
        if time_ns < first {
            return Err((
                "time".into(),
                "earlier than the trace's first I/O (events out of order)".into(),
            ));
        }
        let rel = time_ns - first;
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
    })?;
    if trace.ios.is_empty() && trace.skipped == 0 && !text.trim().is_empty() {
        let message = if events == 0 {
            "no blkparse events"
        } else {
            "no I/O issued to the driver (D events with sectors): nothing to replay"
        };
        return Err(TraceError {
            file: path.to_path_buf(),
            line: 0,
            field: "text".into(),
            message: message.into(),
        });
    }
    Ok(trace)
}

/// An event line starts with `MAJ,MIN` (digits, a comma, digits) and has at least 7 fields.
fn is_event(line: &str) -> bool {
    let mut f = line.split_whitespace();
    let dev_ok = f.next().and_then(|d| d.split_once(',')).is_some_and(|(a, b)| {
        !a.is_empty() && !b.is_empty() && a.bytes().all(|c| c.is_ascii_digit()) && b.bytes().all(|c| c.is_ascii_digit())
    });
    dev_ok && f.take(6).count() == 6
}

/// (action, device, time ns, offset bytes, size bytes, write)
type Parsed = (char, u32, u64, u64, u32, bool);

fn parse_line(line: &str) -> Result<Option<Parsed>, (String, String)> {
    // The fields used are the first ten; what follows is free text (the process name, which
    // may hold spaces), never collected: a line of millions of fields costs no memory.
    let f: Vec<&str> = line.split_whitespace().take(10).collect();
    let (maj, min) = f[0].split_once(',').expect("checked by is_event");
    let maj: u32 = field(Some(maj), "major")?;
    let min: u32 = field(Some(min), "minor")?;
    // The kernel's dev_t has 12 bits of major and 20 of minor: larger numbers would collide.
    if maj >= 1 << 12 || min >= 1 << 20 {
        return Err(("device".into(), format!("{maj},{min} is not a Linux device number")));
    }
    let secs: f64 = field(Some(f[3]), "time")?;
    if !(secs.is_finite() && (0.0..=MAX_TIME_SECONDS).contains(&secs)) {
        return Err((
            "time".into(),
            format!("{secs:e} is not a time in seconds (0 to {MAX_TIME_SECONDS:e})"),
        ));
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
    if blocks == 0 && action == 'D' {
        return Err(("blocks".into(), "0 (an I/O of no bytes)".into()));
    }
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
