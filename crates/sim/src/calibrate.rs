//! Calibration against real readahead sweeps: read the measured sweep, run the same grid in
//! the simulator, and compare the rankings of readahead values per workload.

use std::collections::BTreeMap;

/// Mean measured throughput per (workload, read_ahead_kb).
pub type Sweep = BTreeMap<(String, u64), f64>;

/// Read the calibration CSV (`shared/reference/calibration/readahead-dbbench-sweep-*.csv`):
/// the main sweep rows (tags `s1`, `s2`, `s3a`, `s3b`, `dflt`, mmap reads, exit code 0),
/// averaged per workload and readahead. Errors name the line and the field.
pub fn load_sweep(csv: &str) -> Result<Sweep, String> {
    let mut lines = csv.lines().enumerate();
    let (_, header) = lines.next().ok_or("empty file")?;
    let cols: Vec<&str> = header.split(',').collect();
    let col = |name: &str| {
        cols.iter()
            .position(|c| *c == name)
            .ok_or(format!("line 1: no column {name:?}"))
    };
    let (tag, wl, ra, mmap, ops, rc) = (
        col("tag")?,
        col("workload")?,
        col("ra_kb")?,
        col("mmap")?,
        col("ops_sec")?,
        col("rc")?,
    );
    let mut sums: BTreeMap<(String, u64), (f64, u32)> = BTreeMap::new();
    for (no, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        let get = |i: usize, name: &str| {
            f.get(i)
                .copied()
                .ok_or(format!("line {}: missing field {name}", no + 1))
        };
        let prefix = get(tag, "tag")?.split('_').next().unwrap_or("");
        if !matches!(prefix, "s1" | "s2" | "s3a" | "s3b" | "dflt") || get(mmap, "mmap")? != "1" || get(rc, "rc")? != "0"
        {
            continue;
        }
        let ra_kb: u64 = get(ra, "ra_kb")?
            .parse()
            .map_err(|_| format!("line {}: ra_kb is not a number", no + 1))?;
        let v: f64 = get(ops, "ops_sec")?
            .parse()
            .map_err(|_| format!("line {}: ops_sec is not a number", no + 1))?;
        let e = sums
            .entry((get(wl, "workload")?.to_string(), ra_kb))
            .or_insert((0.0, 0));
        e.0 += v;
        e.1 += 1;
    }
    Ok(sums.into_iter().map(|(k, (s, n))| (k, s / n as f64)).collect())
}

/// Spearman's rank correlation of two equally long series (average ranks for ties).
pub fn spearman(a: &[f64], b: &[f64]) -> f64 {
    fn ranks(v: &[f64]) -> Vec<f64> {
        let mut idx: Vec<usize> = (0..v.len()).collect();
        idx.sort_by(|&i, &j| v[i].total_cmp(&v[j]));
        let mut r = vec![0.0; v.len()];
        let mut i = 0;
        while i < idx.len() {
            let mut j = i;
            while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
                j += 1;
            }
            for k in i..=j {
                r[idx[k]] = (i + j) as f64 / 2.0 + 1.0;
            }
            i = j + 1;
        }
        r
    }
    let (ra, rb) = (ranks(a), ranks(b));
    let n = a.len() as f64;
    let (ma, mb) = (ra.iter().sum::<f64>() / n, rb.iter().sum::<f64>() / n);
    let cov: f64 = ra.iter().zip(&rb).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = ra.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = rb.iter().map(|y| (y - mb).powi(2)).sum();
    if va == 0.0 || vb == 0.0 {
        return 0.0;
    }
    cov / (va * vb).sqrt()
}

/// The readahead with the highest throughput in `series` of (read_ahead_kb, ops/s).
pub fn best(series: &[(u64, f64)]) -> Option<u64> {
    series.iter().max_by(|a, b| a.1.total_cmp(&b.1)).map(|s| s.0)
}
