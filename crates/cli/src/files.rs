//! File helpers: numeric CSV reading with line-numbered errors.

use anyhow::{bail, Context, Result};
use std::io::Read;
use std::path::Path;

/// Read a file, or standard input for `-`.
pub fn read_text(path: &Path) -> Result<String> {
    if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("<stdin>: cannot read")?;
        return Ok(s);
    }
    std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))
}

/// Parse rows of `width` numbers separated by commas or white space. Blank lines and lines
/// starting with `#` are skipped; a first line that is not numeric is taken as a header.
pub fn read_rows(path: &Path, width: usize) -> Result<Vec<f32>> {
    let text = read_text(path)?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let toks: Vec<&str> = line
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|t| !t.is_empty())
            .collect();
        let parsed: Result<Vec<f32>, _> = toks.iter().map(|t| t.parse::<f32>()).collect();
        let vals = match parsed {
            Ok(v) => v,
            Err(_) if i == 0 && out.is_empty() => continue, // header
            Err(_) => {
                let bad = toks.iter().find(|t| t.parse::<f32>().is_err()).unwrap();
                bail!("{}: line {}: {bad:?} is not a number", path.display(), i + 1)
            }
        };
        if vals.len() != width {
            bail!(
                "{}: line {}: expected {width} values (the model's inputs), found {}",
                path.display(),
                i + 1,
                vals.len()
            );
        }
        if let Some(v) = vals.iter().find(|v| !v.is_finite()) {
            bail!("{}: line {}: value {v} is not finite", path.display(), i + 1);
        }
        out.extend(vals);
    }
    Ok(out)
}
