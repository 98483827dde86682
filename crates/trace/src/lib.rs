//! `iolearn-trace`: block I/O traces.
//!
//! One record type, [`BlockIo`], and readers for the formats the latency work meets: the MSR
//! Cambridge CSV ([`msr`]), the 5-column text of LinnOS and Heimdall ([`linnos`]), `blkparse`
//! text ([`blkparse`]) and our own binary form ([`binary`], fast and checksummed). Bad lines are
//! an error naming the file, the line and the field, or, with [`ReadOptions::skip_bad`], counted
//! and skipped. [`stats`] prints the summary Heimdall's tools print (so the two can be
//! compared); [`tools`] cuts, finds the busiest window, and rerates; [`generate`] makes synthetic
//! traces and families of them to tune on one set and report on another; [`stream::Stream`]
//! reads a file record by record (a replay of any length holds one record at a time).
#![deny(missing_docs)]

pub mod binary;
pub mod blkparse;
pub mod generate;
pub mod linnos;
pub mod msr;
pub mod stats;
pub mod stream;
pub mod sys;
pub mod tools;

use std::fmt;
use std::path::{Path, PathBuf};

/// One block I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockIo {
    /// Arrival time, ns from the trace's start (or its own epoch).
    pub arrival_ns: u64,
    /// Device (disk number).
    pub device: u32,
    /// Offset, bytes.
    pub offset: u64,
    /// Size, bytes.
    pub size: u32,
    /// A write (else a read).
    pub write: bool,
    /// Latency when the trace has it.
    pub latency_ns: Option<u64>,
    /// Queue depth at arrival when the trace has it.
    pub queue_depth: Option<u32>,
}

impl BlockIo {
    /// A read or write without latency or queue depth.
    pub fn new(arrival_ns: u64, device: u32, offset: u64, size: u32, write: bool) -> BlockIo {
        BlockIo {
            arrival_ns,
            device,
            offset,
            size,
            write,
            latency_ns: None,
            queue_depth: None,
        }
    }
}

/// A trace that could not be read: which file, which line (1-based; 0 when not line based),
/// which field, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    /// The file.
    pub file: PathBuf,
    /// Line number (0: the file as a whole or a binary offset in `field`).
    pub line: usize,
    /// The field.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl TraceError {
    /// An error about `file` as a whole (line 0): which `field`, and what is wrong.
    pub fn of_file(file: &Path, field: &str, message: impl Into<String>) -> TraceError {
        TraceError {
            file: file.to_path_buf(),
            line: 0,
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(
                f,
                "{}: line {}: {}: {}",
                self.file.display(),
                self.line,
                self.field,
                self.message
            )
        } else {
            write!(f, "{}: {}: {}", self.file.display(), self.field, self.message)
        }
    }
}

impl std::error::Error for TraceError {}

/// How to treat bad lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Skip (and count) lines that do not parse instead of failing on the first.
    pub skip_bad: bool,
}

/// A trace read from a file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// The I/Os, in file order.
    pub ios: Vec<BlockIo>,
    /// Lines skipped as bad (with `skip_bad`).
    pub skipped: usize,
    /// The first bad line's error, when some were skipped.
    pub first_error: Option<TraceError>,
}

/// Trace formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `arrival_ms device offset_bytes size_bytes op` (op 1 = read, 0 = write).
    Linnos,
    /// MSR Cambridge CSV.
    Msr,
    /// blkparse text.
    Blkparse,
    /// iolearn's binary form.
    Binary,
}

impl Format {
    /// By name (`linnos`, `msr`, `blkparse`, `binary`).
    pub fn parse(name: &str) -> Option<Format> {
        Some(match name {
            "linnos" | "heimdall" | "trace" => Format::Linnos,
            "msr" | "csv" => Format::Msr,
            "blkparse" => Format::Blkparse,
            "binary" | "iolt" => Format::Binary,
            _ => return None,
        })
    }

    /// Guess from the file name and first bytes.
    pub fn guess(path: &Path, head: &[u8]) -> Format {
        if head.starts_with(binary::MAGIC) {
            return Format::Binary;
        }
        let name = path.to_string_lossy().to_ascii_lowercase();
        if name.ends_with(".csv") {
            Format::Msr
        } else if name.contains("blkparse") || name.ends_with(".blktrace.txt") {
            Format::Blkparse
        } else {
            Format::Linnos
        }
    }
}

/// The latest time a trace record may carry, in seconds from its epoch: 1.8e10 s (570 years)
/// in nanoseconds still fits a `u64` (1.8e19), so no reader's cast can saturate.
pub const MAX_TIME_SECONDS: f64 = 1.8e10;

/// The largest trace file [`read_file`] reads (the whole file is held in memory): a day of the
/// busiest MSR Cambridge volume is about 1 GiB of text.
pub const MAX_TRACE_BYTES: u64 = 4 << 30;

/// Read a trace file in `format` (guessed when `None`); `-` reads standard input (its format
/// guessed from its first bytes: binary or LinnOS text) and errors name it `<stdin>`.
pub fn read_file(path: &Path, format: Option<Format>, opts: ReadOptions) -> Result<Trace, TraceError> {
    let file_error = |path: &Path, message: String| TraceError::of_file(path, "file", message);
    if path.as_os_str() == "-" {
        let path = Path::new(iolearn_safeio::STDIN_NAME);
        let bytes = iolearn_safeio::read_stdin(MAX_TRACE_BYTES).map_err(|e| file_error(path, e.reason))?;
        return read_bytes(&bytes, path, format, opts);
    }
    let bytes = iolearn_safeio::read(path, MAX_TRACE_BYTES).map_err(|e| file_error(path, e.reason))?;
    read_bytes(&bytes, path, format, opts)
}

/// Read a trace held in memory; `path` names it in errors and guides the format guess.
pub fn read_bytes(bytes: &[u8], path: &Path, format: Option<Format>, opts: ReadOptions) -> Result<Trace, TraceError> {
    let format = format.unwrap_or_else(|| Format::guess(path, &bytes[..bytes.len().min(16)]));
    if format == Format::Binary {
        return binary::decode(bytes, path).map(|ios| Trace {
            ios,
            ..Default::default()
        });
    }
    let text = std::str::from_utf8(bytes).map_err(|e| TraceError {
        file: path.to_path_buf(),
        line: 1 + bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count(),
        field: "text".into(),
        message: "not UTF-8 text".into(),
    })?;
    match format {
        Format::Linnos => linnos::parse(text, path, opts),
        Format::Msr => msr::parse(text, path, opts),
        Format::Blkparse => blkparse::parse(text, path, opts),
        Format::Binary => unreachable!(),
    }
}

/// Shared line loop: `parse_line` returns `Ok(None)` for lines to ignore (comments, blanks).
pub(crate) fn parse_lines(
    text: &str,
    path: &Path,
    opts: ReadOptions,
    mut parse_line: impl FnMut(&str) -> Result<Option<BlockIo>, (String, String)>,
) -> Result<Trace, TraceError> {
    parse_lines_into(text, path, opts, |line, t| {
        if let Some(io) = parse_line(line)? {
            t.ios.push(io);
        }
        Ok(())
    })
}

/// The line loop for formats whose lines also change earlier records (blkparse completions):
/// `parse_line` works on the trace so far. A bad line is an error naming the file, the line and
/// the field, or with `skip_bad` is counted and skipped.
pub(crate) fn parse_lines_into(
    text: &str,
    path: &Path,
    opts: ReadOptions,
    mut parse_line: impl FnMut(&str, &mut Trace) -> Result<(), (String, String)>,
) -> Result<Trace, TraceError> {
    let mut t = Trace::default();
    for (i, line) in text.lines().enumerate() {
        if let Err((field, message)) = parse_line(line, &mut t) {
            let e = TraceError {
                file: path.to_path_buf(),
                line: i + 1,
                field,
                message,
            };
            if !opts.skip_bad {
                return Err(e);
            }
            t.skipped += 1;
            t.first_error.get_or_insert(e);
        }
    }
    Ok(t)
}

/// Parse one field, naming it on error.
pub(crate) fn field<T: std::str::FromStr>(v: Option<&str>, name: &str) -> Result<T, (String, String)> {
    let v = v.ok_or_else(|| (name.to_string(), "missing".to_string()))?;
    v.trim_ascii().parse().map_err(|_| {
        (
            name.to_string(),
            format!("{} is not a valid {name}", iolearn_safeio::excerpt(v.trim(), 40)),
        )
    })
}
