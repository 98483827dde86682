//! `iolearn model ...`: import KML models, inspect and run model files.

use crate::files::read_rows;
use anyhow::{bail, Context, Result};
use clap::Subcommand;
use iolearn_ml::{kml, Layer, ModelFile, ModelKind};
use iolearn_safeio::printable;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Subcommand)]
pub enum ModelCommand {
    /// Import KML's released readahead network (an nn_arch_data directory), or its decision tree.
    ImportKml {
        /// KML's nn_arch_data directory (linear*_w.csv, linear*_bias.csv, mean.csv, stddev.csv).
        dir: PathBuf,
        /// Output model file.
        #[arg(short, long)]
        output: PathBuf,
        /// Import this decision tree (scikit-learn export_text, KML's readahead_model.dt)
        /// instead of the network; the normaliser still comes from DIR.
        #[arg(long, value_name = "FILE.dt")]
        tree: Option<PathBuf>,
    },
    /// Show a model file's architecture, sizes, schema and checksum.
    Inspect {
        /// Model file.
        file: PathBuf,
        /// Print the whole model (weights included) as JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Predict one class per input row, one per line.
    Predict {
        /// Model file.
        file: PathBuf,
        /// Rows of raw features, comma or space separated ("-" for standard input).
        csv: PathBuf,
        /// The rows are already normalised (as KML's input.csv is): skip the model's normaliser.
        #[arg(long)]
        prenormalized: bool,
        /// Print the class name instead of its index.
        #[arg(long)]
        labels: bool,
    },
}

pub fn run(cmd: ModelCommand) -> Result<()> {
    match cmd {
        ModelCommand::ImportKml { dir, output, tree } => import_kml(&dir, &output, tree.as_deref()),
        ModelCommand::Inspect { file, json } => inspect(&file, json),
        ModelCommand::Predict {
            file,
            csv,
            prenormalized,
            labels,
        } => predict(&file, &csv, prenormalized, labels),
    }
}

pub fn load(path: &Path) -> Result<ModelFile> {
    Ok(ModelFile::load(path)?)
}

fn import_kml(dir: &Path, output: &Path, tree: Option<&Path>) -> Result<()> {
    iolearn_safeio::check_target(output)?;
    // The output must not be one of the files the import reads (KML's CSVs, the tree).
    let inputs = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .take(10_000)
        .map(|e| e.path())
        .chain(tree.map(Path::to_path_buf));
    for input in inputs {
        if iolearn_safeio::same_file(&input, output) {
            bail!(
                "{}: is an input of the import ({}); write the model elsewhere",
                output.display(),
                input.display()
            );
        }
    }
    let file = match tree {
        Some(dt) => kml::import_tree(dt, dir)?,
        None => kml::import_network(dir)?,
    };
    let written = file.save(output)?;
    eprintln!(
        "imported KML {} ({}) -> {} ({} bytes)",
        file.kind.name(),
        tree.map_or_else(|| dir.display().to_string(), |t| t.display().to_string()),
        output.display(),
        written
    );
    Ok(())
}

fn inspect(path: &Path, json: bool) -> Result<()> {
    let bytes = iolearn_safeio::read(path, iolearn_ml::format::MAX_FILE_BYTES)?;
    let file = ModelFile::from_bytes(&bytes).with_context(|| format!("{}", path.display()))?;
    let mut out = std::io::stdout().lock();
    if json {
        out.write_all(file.to_json().as_bytes())?;
        return Ok(());
    }
    writeln!(
        out,
        "file:          {} ({} bytes, format v{})",
        path.display(),
        bytes.len(),
        iolearn_ml::format::VERSION
    )?;
    writeln!(
        out,
        "checksum:      crc32 {:#010x} (verified)",
        u32::from_le_bytes(bytes[bytes.len() - 4..].try_into()?)
    )?;
    writeln!(out, "schema:        {}", printable(&file.schema))?;
    match &file.kind {
        ModelKind::Mlp(net) => {
            let arch: Vec<String> = net
                .layers()
                .iter()
                .map(|l| match l {
                    Layer::Linear(l) => format!("linear {}->{}", l.in_dim, l.out_dim),
                    other => other.name().to_string(),
                })
                .collect();
            writeln!(out, "model:         mlp {}", arch.join(", "))?;
            writeln!(out, "parameters:    {}", net.n_params())?;
            writeln!(
                out,
                "memory:        {} bytes model + {} bytes workspace",
                net.bytes(),
                net.workspace().bytes()
            )?;
        }
        ModelKind::Tree(t) => {
            writeln!(
                out,
                "model:         decision tree, {} nodes, depth {}",
                t.nodes().len(),
                t.depth()
            )?;
            writeln!(out, "memory:        {} bytes", t.bytes())?;
        }
    }
    writeln!(out, "inputs:        {}", file.kind.in_dim())?;
    for (i, f) in file.features.iter().enumerate() {
        let norm = file
            .normaliser
            .as_ref()
            .map(|z| {
                let log = if z.log1p.get(i) == Some(&true) {
                    "log1p, then "
                } else {
                    ""
                };
                format!("  ({log}mean {:.6}, std {:.6})", z.mean[i], z.std[i])
            })
            .unwrap_or_default();
        writeln!(out, "  {i}: {}{norm}", printable(f))?;
    }
    let normaliser = match &file.normaliser {
        None => "none",
        Some(z) if z.log1p.is_empty() => "z-score",
        Some(_) => "z-score (after sign(x) ln(1 + |x|) on the features marked log1p)",
    };
    writeln!(out, "normaliser:    {normaliser}")?;
    if !file.classes.is_empty() {
        writeln!(
            out,
            "classes:       {} -> {}",
            file.classes.len(),
            if file.action_unit.is_empty() {
                "action".to_string()
            } else {
                printable(&file.action_unit)
            }
        )?;
        for (i, c) in file.classes.iter().enumerate() {
            writeln!(out, "  {i}: {} -> {}", printable(&c.label), c.action)?;
        }
    }
    for (k, v) in &file.meta {
        writeln!(out, "meta:          {} = {}", printable(k), printable(v))?;
    }
    Ok(())
}

fn predict(path: &Path, csv: &Path, prenormalized: bool, labels: bool) -> Result<()> {
    let file = load(path)?;
    let d = file.kind.in_dim();
    let mut x = read_rows(csv, d)?;
    if x.is_empty() {
        bail!("{}: no rows to predict", csv.display());
    }
    if !prenormalized {
        if let Some(z) = &file.normaliser {
            z.transform_rows(&mut x);
            // An input far outside the model's statistics overflows: an error, not a class.
            if let Some(k) = x.iter().position(|v| !v.is_finite()) {
                anyhow::bail!(
                    "{}: row {}: an input is not finite after normalisation (far outside the model's range)",
                    csv.display(),
                    k / d + 1
                );
            }
        }
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let name = |c: usize| {
        file.classes
            .get(c)
            .map_or_else(|| c.to_string(), |a| printable(&a.label))
    };
    match &file.kind {
        ModelKind::Mlp(net) => {
            let mut ws = net.workspace();
            for (i, row) in x.chunks_exact(d).enumerate() {
                // NaN logits would make argmax say class 0: an error, not a prediction.
                if net.forward(row, &mut ws).iter().any(|v| !v.is_finite()) {
                    anyhow::bail!(
                        "{}: row {}: the model's output is not finite (an input far outside its training range?)",
                        csv.display(),
                        i + 1
                    );
                }
                let c = net.predict_class(row, &mut ws);
                if labels {
                    writeln!(out, "{}", name(c))?
                } else {
                    writeln!(out, "{c}")?
                }
            }
        }
        ModelKind::Tree(t) => {
            for row in x.chunks_exact(d) {
                let c = t.predict_class(row);
                if labels {
                    writeln!(out, "{}", name(c))?
                } else {
                    writeln!(out, "{c}")?
                }
            }
        }
    }
    out.flush()?;
    Ok(())
}
