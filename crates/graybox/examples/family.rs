//! The prober on many simulated drives, its answers beside their truth, as a Markdown table
//! (the table in `docs/benchmarks.md`):
//!
//! ```text
//! family SEED_FIRST SEED_LAST     # drives of random geometry (`random_drive`)
//! family presets                  # the presets under every GC design
//! ```

use iolearn_flash::ssd::{GcMode, SsdConfig};
use iolearn_graybox::{probe_sim, random_drive, Options, Report, Truth};
use std::process::ExitCode;

/// "found" when it equals `truth`, else "found (truth) **x**".
fn cell(found: Option<u64>, truth: u64, show: impl Fn(u64) -> String) -> (String, bool) {
    match found {
        Some(f) if f == truth => (show(f), true),
        f => (
            format!("{} ({}) **x**", f.map_or("-".into(), &show), show(truth)),
            false,
        ),
    }
}

/// A table row, and whether every property was found (the flush interval within 4%, the GC
/// onset within 1% of the capacity and two buffer fills of the truth, as the tests ask; the
/// planes are hidden behind the channels, and the channels expected, when a page's transfer
/// outlasts its read).
fn row(name: &str, cfg: &SsdConfig, r: &Report, t: &Truth) -> (String, bool) {
    let cap = r.capacity_bytes as f64;
    let kib = |v: u64| format!("{} KiB", v >> 10);
    let (page, a) = cell(r.unit_bytes.value, t.unit_bytes, kib);
    let units_of = |b: u64| b / t.unit_bytes;
    let (buffer, b) = match r.buffer_bytes.value {
        Some(f) if f.abs_diff(t.buffer_bytes) <= 2 * t.unit_bytes => (format!("{} pages", units_of(f)), true),
        f => (
            format!(
                "{} ({}) **x**",
                f.map_or("-".into(), |f| units_of(f).to_string()),
                units_of(t.buffer_bytes)
            ),
            false,
        ),
    };
    let hidden = cfg.planes() > cfg.channels && cfg.page_bytes * 1_000_000_000 / cfg.channel_bytes_per_s >= cfg.read_ns;
    let visible = if hidden { t.channels } else { t.parallel_units };
    let (mut units, c) = cell(r.parallel_units.value, visible, |v| v.to_string());
    if hidden {
        units += &format!(" (of {}, hidden)", t.parallel_units);
    }
    let (channels, d) = cell(r.channels.value, t.channels, |v| v.to_string());
    let ms = |v: u64| format!("{:.1}", v as f64 / 1e6);
    let (flush, f) = match r.flush_interval_ns.value {
        Some(v) if v.abs_diff(t.flush_interval_ns) * 25 <= t.flush_interval_ns => (ms(v), true),
        v => (
            format!("{} ({}) **x**", v.map_or("-".into(), ms), ms(t.flush_interval_ns)),
            false,
        ),
    };
    let (gc, e) = match (r.gc_onset_bytes.value, t.gc_onset_bytes) {
        (Some(f), Some(g)) => {
            let ok = f.abs_diff(g) as f64 <= 0.01 * cap + 2.0 * t.buffer_bytes as f64;
            let mark = if ok { "" } else { " **x**" };
            (
                format!(
                    "{:.3} / {:.3} ({:+.1}%){mark}",
                    f as f64 / cap,
                    g as f64 / cap,
                    100.0 * (f as f64 - g as f64) / cap
                ),
                ok,
            )
        }
        (None, None) => ("- / -".into(), true),
        (f, g) => (
            format!(
                "{} / {} **x**",
                f.map_or("-".into(), |f| format!("{:.3}", f as f64 / cap)),
                g.map_or("-".into(), |g| format!("{:.3}", g as f64 / cap))
            ),
            false,
        ),
    };
    let line = format!(
        "| {name} | {:.1} | {page} | {buffer} | {flush} | {units} | {channels} | {} us / {} MB/s | {gc} |",
        cap / (1u64 << 30) as f64,
        cfg.read_ns / 1000,
        cfg.channel_bytes_per_s / 1_000_000,
    );
    (line, a && b && c && d && e && f)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let drives: Vec<(String, SsdConfig, GcMode)> = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["presets"] => SsdConfig::preset_names()
            .flat_map(|p| {
                ["base", "plane-blocking", "tolerant", "preemptive", "no-gc"].map(|m| {
                    (
                        format!("{p}, {m}"),
                        SsdConfig::by_name(p).unwrap(),
                        GcMode::by_name(m).unwrap(),
                    )
                })
            })
            .collect(),
        [a, b] => {
            match (a.parse::<u64>(), b.parse::<u64>()) {
                (Ok(a), Ok(b)) if a <= b && b - a < 10_000 => (a..=b)
                    .map(|s| (format!("random:{s}"), random_drive(s), GcMode::Base))
                    .collect(),
                _ => {
                    eprintln!("family: seeds {a:?} {b:?}: two whole numbers, the first at most the second, under 10,000 apart");
                    return ExitCode::from(2);
                }
            }
        }
        _ => {
            eprintln!("usage: family SEED_FIRST SEED_LAST | family presets");
            return ExitCode::from(2);
        }
    };
    println!("| drive | GiB | page | buffer | flush, ms | parallel units | channels | page read / channel | GC onset found / true, x capacity (error) |");
    println!("|---|---:|---|---|---|---|---|---|---|");
    let mut wrong = 0;
    for (name, cfg, mode) in &drives {
        match probe_sim(cfg, *mode, &Options::default(), &mut |_| {}) {
            Ok((r, t)) => {
                let (line, right) = row(name, cfg, &r, &t);
                wrong += usize::from(!right);
                println!("{line}");
            }
            Err(e) => {
                wrong += 1;
                println!("| {name} | error: {e} |");
            }
        }
    }
    println!(
        "\n{} drives, {wrong} with a property not found (**x**; in brackets: the truth)",
        drives.len()
    );
    ExitCode::SUCCESS
}
