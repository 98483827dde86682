//! Synthetic data sets for tests, benchmarks and examples (no downloads: everything is
//! generated from a seed).

use crate::rng::Rng;
use alloc::vec::Vec;

/// KML's readahead sweep values in 512-byte sectors: 1 2 4 8 16 32 then 64..1024 step 64.
pub fn kml_sweep_sectors() -> Vec<u32> {
    let mut v = alloc::vec![1, 2, 4, 8, 16, 32];
    v.extend((1..=16).map(|k| k * 64));
    v
}

/// A 4-class data set shaped like KML's readahead features (raw, not normalised): five
/// columns `[n_transactions, var_pop/range, var_sample/range, mean |page delta|, ra/1024]`,
/// classes 0 readrandom, 1 readrandomwriterandom, 2 readseq, 3 readreverse, in KML's ranges
/// (`shared/reference/kml/readahead/nn_arch_data`). `n_per_class` rows per class, shuffled.
/// The classes overlap a little, so a good model scores high but not perfectly.
pub fn kml_like(n_per_class: usize, seed: u64) -> (Vec<f32>, Vec<f32>) {
    /// (median, log-sigma) or (mean, sd) of one feature.
    type Dist = (f64, f64);
    // (median n_tx, sigma), (var mean, sd), (median |delta|, sigma)
    const P: [(Dist, Dist, Dist); 4] = [
        ((90_000.0, 0.25), (510.0, 12.0), (25.0, 0.25)),
        ((40_000.0, 0.25), (510.0, 12.0), (80.0, 0.25)),
        ((25_000.0, 0.25), (530.0, 50.0), (6.0, 0.20)),
        ((12_000.0, 0.25), (490.0, 50.0), (2.0, 0.20)),
    ];
    let sweep = kml_sweep_sectors();
    let mut rng = Rng::new(seed);
    let mut rows: Vec<([f32; 5], f32)> = Vec::with_capacity(4 * n_per_class);
    for (c, &((n_med, n_sig), (v_mu, v_sd), (d_med, d_sig))) in P.iter().enumerate() {
        for _ in 0..n_per_class {
            let n = (n_med * libm::exp(n_sig * rng.normal())).max(2.0);
            let var = (v_mu + v_sd * rng.normal()).max(1.0);
            let delta = d_med * libm::exp(d_sig * rng.normal());
            let ra = sweep[rng.below(sweep.len())] as f64 / 1024.0;
            let row = [
                n as f32,
                var as f32,
                (var * n / (n - 1.0)) as f32,
                delta as f32,
                ra as f32,
            ];
            rows.push((row, c as f32));
        }
    }
    rng.shuffle(&mut rows);
    let x = rows.iter().flat_map(|(r, _)| r.iter().copied()).collect();
    let y = rows.iter().map(|(_, c)| *c).collect();
    (x, y)
}

/// Parse rows of `width` numbers (feature rows for a model: `iolearn model predict`), separated
/// by commas (then fields may not be empty) or white space. Blank lines and lines starting with
/// `#` are skipped, and a leading byte-order mark. The first other line is a header only when
/// none of its fields is a number: a row with a typo is an error, never a dropped "header".
/// Errors name the line ([`crate::Error::Parse`]).
pub fn parse_rows(text: &str, width: usize) -> crate::Result<Vec<f32>> {
    use crate::error::quote;
    use crate::Error;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = Vec::new();
    let mut first = true;
    let mut header_line = None;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let no = i + 1;
        // At most one token past the width is kept: a line of millions of fields is an error,
        // not millions of slices in memory.
        let toks: Vec<&str> = if line.contains(',') {
            line.split(',').map(str::trim).take(width + 1).collect()
        } else {
            line.split_whitespace().take(width + 1).collect()
        };
        let header = first && toks.iter().all(|t| !t.is_empty() && t.parse::<f32>().is_err());
        first = false;
        if header {
            header_line = Some(no);
            continue;
        }
        if let Some(k) = toks.iter().position(|t| t.is_empty()) {
            return Err(Error::parse(no, alloc::format!("field {} is empty", k + 1)));
        }
        if toks.len() != width {
            let found = if toks.len() > width {
                alloc::format!("more than {width}")
            } else {
                alloc::format!("{}", toks.len())
            };
            return Err(Error::parse(
                no,
                alloc::format!("expected {width} values (the model's inputs), found {found}"),
            ));
        }
        for (k, t) in toks.iter().enumerate() {
            match t.parse::<f32>() {
                Ok(v) if v.is_finite() => out.push(v),
                // Names what was written: 1e300 reads as an f32 infinity, and "inf" would
                // leave the user looking for a value that is not in the file.
                Ok(_) => {
                    return Err(Error::parse(
                        no,
                        alloc::format!(
                            "field {}: {} is not a finite 32-bit float (at most 3.4e38)",
                            k + 1,
                            quote(t)
                        ),
                    ))
                }
                Err(_) => {
                    return Err(Error::parse(
                        no,
                        alloc::format!("field {}: {} is not a number", k + 1, quote(t)),
                    ))
                }
            }
        }
    }
    if let (Some(no), true) = (header_line, out.is_empty()) {
        // A file of one "header" and no rows is more likely a format the reader does not
        // know (semicolons, say) than a request to predict nothing.
        return Err(Error::parse(
            no,
            "a header and no rows (fields are separated by commas or white space)",
        ));
    }
    Ok(out)
}
