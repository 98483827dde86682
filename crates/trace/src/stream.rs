//! A trace read record by record, so a replay of any length holds one record at a time:
//! MSR and LinnOS text line by line, the binary form record by record (its checksum checked
//! at the end). `blkparse` text attaches completions to earlier requests, so it is read whole.

use crate::{binary, linnos, msr, BlockIo, Format, ReadOptions, TraceError};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

enum Source {
    Msr(msr::Lines),
    Linnos,
    Binary {
        left: u64,
        index: u64,
        crc: crc32fast::Hasher,
    },
    Whole(std::vec::IntoIter<BlockIo>),
}

/// The records of a trace file, in file order, read as they are needed.
pub struct Stream {
    path: PathBuf,
    reader: Box<dyn BufRead + Send>,
    source: Source,
    opts: ReadOptions,
    line_no: usize,
    line: String,
    skipped: usize,
    first_error: Option<TraceError>,
    done: bool,
}

impl Stream {
    /// Open `path` (`-`: standard input) in `format` (guessed from the name and the first
    /// bytes when `None`).
    pub fn open(path: &Path, format: Option<Format>, opts: ReadOptions) -> Result<Stream, TraceError> {
        let file_error = |path: &Path, message: String| TraceError::of_file(path, "file", message);
        let (name, input): (PathBuf, Box<dyn Read + Send>) = if path.as_os_str() == "-" {
            (PathBuf::from(iolearn_safeio::STDIN_NAME), Box::new(std::io::stdin()))
        } else {
            let f = std::fs::File::open(path).map_err(|e| file_error(path, e.to_string()))?;
            let meta = f.metadata().map_err(|e| file_error(path, e.to_string()))?;
            if meta.is_dir() {
                return Err(file_error(path, "a directory, not a trace file".into()));
            }
            (path.to_path_buf(), Box::new(f))
        };
        let mut reader: Box<dyn BufRead + Send> = Box::new(BufReader::with_capacity(1 << 20, input));
        let head = reader.fill_buf().map_err(|e| file_error(&name, e.to_string()))?;
        let format = format.unwrap_or_else(|| Format::guess(&name, &head[..head.len().min(16)]));
        let source = match format {
            Format::Msr => Source::Msr(msr::Lines::default()),
            Format::Linnos => Source::Linnos,
            Format::Binary => {
                let mut h = [0u8; binary::HEADER];
                reader
                    .read_exact(&mut h)
                    .map_err(|_| TraceError::of_file(&name, "header", "truncated"))?;
                let left = binary::header(&h, &name)?;
                let mut crc = crc32fast::Hasher::new();
                crc.update(&h);
                Source::Binary { left, index: 0, crc }
            }
            Format::Blkparse => {
                let mut bytes = Vec::new();
                reader
                    .take(crate::MAX_TRACE_BYTES + 1)
                    .read_to_end(&mut bytes)
                    .map_err(|e| file_error(&name, e.to_string()))?;
                if bytes.len() as u64 > crate::MAX_TRACE_BYTES {
                    return Err(file_error(
                        &name,
                        format!("over {} bytes (blkparse text is read whole)", crate::MAX_TRACE_BYTES),
                    ));
                }
                let t = crate::read_bytes(&bytes, &name, Some(Format::Blkparse), opts)?;
                let mut s = Stream::new(name, Box::new(std::io::empty()), Source::Whole(t.ios.into_iter()), opts);
                (s.skipped, s.first_error) = (t.skipped, t.first_error);
                return Ok(s);
            }
        };
        Ok(Stream::new(name, reader, source, opts))
    }

    fn new(path: PathBuf, reader: Box<dyn BufRead + Send>, source: Source, opts: ReadOptions) -> Stream {
        Stream {
            path,
            reader,
            source,
            opts,
            line_no: 0,
            line: String::new(),
            skipped: 0,
            first_error: None,
            done: false,
        }
    }

    /// Lines skipped as bad so far (with `skip_bad`).
    pub fn skipped(&self) -> usize {
        self.skipped
    }

    /// The first bad line's error, when some were skipped.
    pub fn first_error(&self) -> Option<&TraceError> {
        self.first_error.as_ref()
    }

    fn error(&self, field: &str, message: String) -> TraceError {
        TraceError {
            file: self.path.clone(),
            line: self.line_no,
            field: field.into(),
            message,
        }
    }

    fn next_line(&mut self) -> Option<Result<BlockIo, TraceError>> {
        loop {
            if matches!(self.source, Source::Linnos) {
                // A plain line whole in the buffer is parsed in place; anything else (a line
                // across the buffer's end, a comment, an odd or bad line) goes the full way.
                if let Ok(buf) = self.reader.fill_buf() {
                    if let Some(end) = buf.iter().position(|&b| b == b'\n') {
                        if let Some(io) = linnos::quick_line(&buf[..end]) {
                            self.reader.consume(end + 1);
                            self.line_no += 1;
                            return Some(Ok(io));
                        }
                    }
                }
            }
            self.line.clear();
            match self.reader.read_line(&mut self.line) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    self.line_no += 1;
                    return Some(Err(self.error("text", "not UTF-8 text".into())));
                }
                Err(e) => return Some(Err(self.error("file", e.to_string()))),
            }
            self.line_no += 1;
            let parsed = match &mut self.source {
                Source::Msr(m) => m.line(&self.line),
                _ => linnos::line(&self.line),
            };
            match parsed {
                Ok(Some(io)) => return Some(Ok(io)),
                Ok(None) => {}
                Err((field, message)) => {
                    let e = self.error(&field, message);
                    if !self.opts.skip_bad {
                        return Some(Err(e));
                    }
                    self.skipped += 1;
                    self.first_error.get_or_insert(e);
                }
            }
        }
    }

    fn next_record(&mut self) -> Option<Result<BlockIo, TraceError>> {
        let Source::Binary { left, index, crc } = &mut self.source else {
            unreachable!()
        };
        if *left == 0 {
            // The checksum, and nothing after it.
            let mut tail = [0u8; 5];
            let got = read_up_to(&mut self.reader, &mut tail);
            return match got {
                Err(e) => Some(Err(TraceError::of_file(&self.path, "file", e.to_string()))),
                Ok(4) => {
                    let stored = u32::from_le_bytes(tail[..4].try_into().unwrap());
                    let computed = crc.clone().finalize();
                    (stored != computed).then(|| {
                        Err(TraceError::of_file(
                            &self.path,
                            "checksum",
                            format!("stored {stored:#010x}, computed {computed:#010x}"),
                        ))
                    })
                }
                Ok(n) => Some(Err(TraceError::of_file(
                    &self.path,
                    "length",
                    format!("{n} bytes after the last record (expected the 4-byte checksum)"),
                ))),
            };
        }
        let mut r = [0u8; binary::RECORD];
        if let Err(e) = self.reader.read_exact(&mut r) {
            return Some(Err(TraceError::of_file(
                &self.path,
                "length",
                format!("record {index}: {e} (the file ends early)"),
            )));
        }
        crc.update(&r);
        *left -= 1;
        *index += 1;
        Some(binary::record(&r, *index - 1, &self.path))
    }
}

/// Read until `buf` is full or the input ends; the bytes read.
fn read_up_to(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl Iterator for Stream {
    type Item = Result<BlockIo, TraceError>;

    /// The next record, or the error that ends the stream (after an error, None).
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = match &mut self.source {
            Source::Whole(ios) => ios.next().map(Ok),
            Source::Binary { .. } => self.next_record(),
            _ => self.next_line(),
        };
        if !matches!(item, Some(Ok(_))) {
            self.done = true;
        }
        item
    }
}
