//! iolearn's binary trace form: fast to read and write, checksummed.
//!
//! Layout (little endian): `IOLT`, u16 version (1), u16 reserved, u64 record count, then per
//! record 40 bytes: u64 arrival ns, u64 offset, u64 latency ns (`u64::MAX`: none), u32 size,
//! u32 device, u32 queue depth (`u32::MAX`: none), u8 flags (bit 0: write), 3 zero bytes; then
//! a CRC-32 (IEEE) of everything before it.

use crate::{BlockIo, TraceError};
use iolearn_ml::format::crc32;
use std::path::Path;

/// File magic.
pub const MAGIC: &[u8; 4] = b"IOLT";
/// Format version.
pub const VERSION: u16 = 1;
pub(crate) const HEADER: usize = 16;
pub(crate) const RECORD: usize = 40;

/// Encode `ios`.
pub fn encode(ios: &[BlockIo]) -> Vec<u8> {
    let mut b = Vec::with_capacity(HEADER + ios.len() * RECORD + 4);
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&VERSION.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&(ios.len() as u64).to_le_bytes());
    for io in ios {
        b.extend_from_slice(&io.arrival_ns.to_le_bytes());
        b.extend_from_slice(&io.offset.to_le_bytes());
        b.extend_from_slice(&io.latency_ns.unwrap_or(u64::MAX).to_le_bytes());
        b.extend_from_slice(&io.size.to_le_bytes());
        b.extend_from_slice(&io.device.to_le_bytes());
        b.extend_from_slice(&io.queue_depth.unwrap_or(u32::MAX).to_le_bytes());
        b.extend_from_slice(&[u8::from(io.write), 0, 0, 0]);
    }
    let crc = crc32(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

/// Decode the bytes of `path`.
pub fn decode(b: &[u8], path: &Path) -> Result<Vec<BlockIo>, TraceError> {
    let err = |field: &str, message: String| TraceError::of_file(path, field, message);
    if b.len() < HEADER + 4 {
        return Err(err("header", format!("truncated: {} bytes", b.len())));
    }
    let n = header(&b[..HEADER], path)?;
    let want = (n as u128) * RECORD as u128 + HEADER as u128 + 4;
    if want != b.len() as u128 {
        return Err(err(
            "length",
            format!("{} bytes for {n} records (expected {want})", b.len()),
        ));
    }
    let (body, crc) = b.split_at(b.len() - 4);
    let stored = u32::from_le_bytes(crc.try_into().unwrap());
    if crc32(body) != stored {
        return Err(err(
            "checksum",
            format!("stored {stored:#010x}, computed {:#010x}", crc32(body)),
        ));
    }
    let mut out = Vec::with_capacity(n as usize);
    for (i, r) in body[HEADER..].chunks_exact(RECORD).enumerate() {
        out.push(record(r, i as u64, path)?);
    }
    Ok(out)
}

/// Check a header (`HEADER` bytes): the record count it announces.
pub(crate) fn header(h: &[u8], path: &Path) -> Result<u64, TraceError> {
    let err = |field: &str, message: String| TraceError::of_file(path, field, message);
    if h.len() < HEADER {
        return Err(err("header", format!("truncated: {} bytes", h.len())));
    }
    if &h[..4] != MAGIC {
        return Err(err("magic", "not an iolearn binary trace (IOLT)".into()));
    }
    let version = u16::from_le_bytes([h[4], h[5]]);
    if version != VERSION {
        return Err(err("version", format!("{version} (this build reads {VERSION})")));
    }
    Ok(u64::from_le_bytes(h[8..16].try_into().unwrap()))
}

/// Record `i` (its `RECORD` bytes `r`).
pub(crate) fn record(r: &[u8], i: u64, path: &Path) -> Result<BlockIo, TraceError> {
    let err = |field: &str, message: String| TraceError::of_file(path, field, message);
    let u64_at = |o: usize| u64::from_le_bytes(r[o..o + 8].try_into().unwrap());
    let u32_at = |o: usize| u32::from_le_bytes(r[o..o + 4].try_into().unwrap());
    if r[36] > 1 || r[37..40] != [0, 0, 0] {
        return Err(err("flags", format!("record {i}: unknown flags {:?}", &r[36..40])));
    }
    if u32_at(24) == 0 {
        return Err(err("size", format!("record {i}: size 0")));
    }
    // Times every reader accepts (`MAX_TIME_SECONDS`): a binary trace converts to text that
    // reads back.
    let max_ns = (crate::MAX_TIME_SECONDS * 1e9) as u64;
    if u64_at(0) > max_ns {
        return Err(err(
            "arrival_ns",
            format!(
                "record {i}: {} is past {max_ns} ({:e} s)",
                u64_at(0),
                crate::MAX_TIME_SECONDS
            ),
        ));
    }
    let lat = u64_at(16);
    let qd = u32_at(32);
    Ok(BlockIo {
        arrival_ns: u64_at(0),
        offset: u64_at(8),
        latency_ns: (lat != u64::MAX).then_some(lat),
        size: u32_at(24),
        device: u32_at(28),
        queue_depth: (qd != u32::MAX).then_some(qd),
        write: r[36] == 1,
    })
}
