//! iolearn's half of `scripts/peer-kml.sh`: KML's released readahead models, imported, run on
//! the same rows as the peer's half (`benches/peers/kml_side_by_side.c`, KML's own C).
//!
//! ```text
//! side_by_side KML_MODEL_DIR rows [N]        # print N rows (default 64: the micro benchmark's)
//! side_by_side KML_MODEL_DIR ROWS {tree|tree-rows|net} CALLS
//! ```
//!
//! ROWS holds 1 to 65536 normalised rows of 5 numbers, used in turn (as the peer does). Prints
//! ns per call (one timed loop after a warm-up) and the checksum of the predicted classes,
//! which must equal the peer's: both sides decide the same thing. `tree-rows` scores all the
//! rows in one call (`predict_classes`), CALLS rows in whole passes, and prints ns per row.

use iolearn_ml::{kml, ModelFile, ModelKind, Rng};
use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

fn fail(msg: String) -> ExitCode {
    eprintln!("side_by_side: {msg}");
    ExitCode::from(2)
}

/// `warm` calls of `predict` on the rows in turn, then `calls` timed ones, as the peer's loop:
/// rows in turn, no barrier around the row (its C call cannot be inlined either); the sum of
/// the classes keeps every call. Returns the time and the sum.
fn timed(
    rows: &[[f32; 5]],
    warm: usize,
    calls: usize,
    mut predict: impl FnMut(&[f32]) -> usize,
) -> (std::time::Duration, usize) {
    let n = rows.len();
    let mut run = |calls: usize| {
        let (mut sum, mut r) = (0usize, 0usize);
        for _ in 0..calls {
            sum += predict(&rows[r]);
            r = if r + 1 == n { 0 } else { r + 1 };
        }
        sum
    };
    black_box(run(warm));
    let t = Instant::now();
    let sum = run(calls);
    (t.elapsed(), sum)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let dir = Path::new(args.get(1).map_or(".", String::as_str));
    if args.get(2).map(String::as_str) == Some("rows") {
        // Uniform normalised rows; the first 64 are the micro benchmark's
        // (crates/ml/benches/inference.rs). More rows than a branch predictor can learn show
        // a walk on varied input, as a tuner's windows are.
        let n = match args.get(3).map(|n| n.parse::<usize>()) {
            None => 64,
            Some(Ok(n)) if (1..=65536).contains(&n) => n,
            Some(_) => return fail(format!("rows N: {:?} is not a count from 1 to 65536", args[3])),
        };
        let mut rng = Rng::new(1);
        let mut text = String::new();
        for _ in 0..n {
            let r: [f32; 5] = core::array::from_fn(|_| rng.uniform(-1.5, 1.5));
            text += &r.map(|v| format!("{v:.9}")).join(" ");
            text.push('\n');
        }
        // A reader that stops early (`| head`) is no error; anything else is.
        return match std::io::stdout().lock().write_all(text.as_bytes()) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => fail(format!("stdout: {e}")),
            _ => ExitCode::SUCCESS,
        };
    }
    let (Some(rows), Some(what), Some(calls)) = (args.get(2), args.get(3), args.get(4)) else {
        return fail("usage: side_by_side KML_MODEL_DIR {rows [N] | ROWS {tree|tree-rows|net} CALLS}".into());
    };
    let Ok(calls) = calls.parse::<usize>() else {
        return fail(format!("CALLS: {calls:?} is not a count"));
    };
    let text = match std::fs::read_to_string(rows) {
        Ok(t) => t,
        Err(e) => return fail(format!("{rows}: {e}")),
    };
    let rows = match iolearn_ml::datasets::parse_rows(&text, 5) {
        Ok(v) if (1..=65536).contains(&(v.len() / 5)) => v,
        Ok(v) => return fail(format!("{rows}: {} rows, expected 1 to 65536", v.len() / 5)),
        Err(e) => return fail(format!("{rows}: {e}")),
    };
    let rows: Vec<[f32; 5]> = rows.chunks(5).map(|r| r.try_into().unwrap()).collect();
    let n = rows.len();
    let nn = dir.join("nn_arch_data");
    let kml_tree = || match kml::import_tree(&dir.join("decision_tree_model/readahead_model.dt"), &nn) {
        Ok(ModelFile {
            kind: ModelKind::Tree(tree),
            ..
        }) => Some(tree),
        _ => None,
    };
    let (elapsed, sum) = match what.as_str() {
        "tree" => {
            let Some(tree) = kml_tree() else {
                return fail(format!("{}: cannot import KML's tree", dir.display()));
            };
            timed(&rows, 100_000, calls, |row| tree.predict_class(row))
        }
        // All the rows in one call (`predict_classes`), as many passes as make up CALLS rows
        // (rounded down to whole passes, at least one); the peer has no such call, so its side of
        // this case is its `tree` loop.
        "tree-rows" => {
            let Some(tree) = kml_tree() else {
                return fail(format!("{}: cannot import KML's tree", dir.display()));
            };
            let flat: Vec<f32> = rows.concat();
            let mut out = vec![0u32; n];
            let mut pass = |passes: usize| {
                let mut sum = 0usize;
                for _ in 0..passes {
                    tree.predict_classes(black_box(&flat), &mut out)
                        .expect("rows of 5 values");
                    sum += out.iter().map(|&c| c as usize).sum::<usize>();
                }
                sum
            };
            black_box(pass(100_000usize.div_ceil(n)));
            let passes = (calls / n).max(1);
            let t = Instant::now();
            let sum = pass(passes);
            let elapsed = t.elapsed();
            println!(
                "{:.3} ns/row checksum {sum} rows {n}",
                elapsed.as_nanos() as f64 / (passes * n) as f64
            );
            return ExitCode::SUCCESS;
        }
        "net" => {
            let Ok(ModelFile {
                kind: ModelKind::Mlp(net),
                ..
            }) = kml::import_network(&nn)
            else {
                return fail(format!("{}: cannot import KML's network", nn.display()));
            };
            let mut ws = net.workspace();
            timed(&rows, 10_000, calls, |row| net.predict_class(row, &mut ws))
        }
        other => return fail(format!("case {other:?}: tree, tree-rows or net")),
    };
    println!(
        "{:.3} ns/call checksum {sum} rows {n}",
        elapsed.as_nanos() as f64 / calls as f64
    );
    ExitCode::SUCCESS
}
