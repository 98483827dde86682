//! File helpers: numeric CSV reading with line-numbered errors.

use anyhow::{Context, Result};
use std::path::Path;

/// The largest input `read_text` takes (a CSV of feature rows).
const MAX_TEXT_BYTES: u64 = 1 << 30;

/// Read a file, or standard input for `-`, up to [`MAX_TEXT_BYTES`].
pub fn read_text(path: &Path) -> Result<String> {
    if path.as_os_str() == "-" {
        let bytes = iolearn_safeio::read_stdin(MAX_TEXT_BYTES)?;
        return String::from_utf8(bytes).with_context(|| format!("{}: not UTF-8 text", iolearn_safeio::STDIN_NAME));
    }
    Ok(iolearn_safeio::read_to_string(path, MAX_TEXT_BYTES)?)
}

/// Feature rows of `width` numbers from `path` (see [`iolearn_ml::datasets::parse_rows`]).
pub fn read_rows(path: &Path, width: usize) -> Result<Vec<f32>> {
    let text = read_text(path)?;
    Ok(iolearn_ml::datasets::parse_rows(&text, width).map_err(|e| e.in_file(path))?)
}
