//! Importers for KML's released readahead models (`sbu-fsl/kernel-ml`,
//! `ml-models-analyses/readahead-per-disk/`): the 5-15-5-4 network in `nn_arch_data/*.csv` and
//! the decision tree in `readahead_model.dt`.
//!
//! KML writes numbers as fixed 16-byte records (`-0000000.393029 `); we parse any whitespace
//! layout and check the count, since other releases put a bias vector on one line.

use crate::format::{ClassAction, ModelFile, ModelKind};
use crate::layer::{Layer, Linear};
use crate::net::Sequential;
use crate::norm::ZScore;
use crate::tree::DecisionTree;
use crate::{Error, Result};
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// Feature-schema name of KML's readahead features.
pub const READAHEAD_SCHEMA: &str = "kml-readahead-v1";

/// KML's readahead feature vector, in order (code release): transactions in the window, M2/n
/// over the page range, M2/(n-1) over the page range, mean |page delta|, readahead / 1024.
pub const READAHEAD_FEATURES: [&str; 5] = [
    "n_transactions",
    "page_offset_var_pop_over_range",
    "page_offset_var_sample_over_range",
    "mean_abs_page_delta",
    "ra_sectors_over_1024",
];

/// Feature-schema name of iolearn's readahead features: KML's five, then the window's
/// direction (net over total page movement, -1..=1) and regularity (share of jumps equal to
/// the one before, 0..=1), which tell readseq from readreverse and a strided read from a
/// random one where KML's cannot.
pub const READAHEAD_SCHEMA_V2: &str = "iolearn-readahead-v2";

/// [`READAHEAD_SCHEMA_V2`]'s feature vector, in order.
pub const READAHEAD_FEATURES_V2: [&str; 7] = [
    "n_transactions",
    "page_offset_var_pop_over_range",
    "page_offset_var_sample_over_range",
    "mean_abs_page_delta",
    "ra_sectors_over_1024",
    "direction",
    "regularity",
];

/// Feature-schema name of iolearn's bounded readahead inputs
/// (`iolearn_policy::readahead::scale_free`): ratios and shares rather than counts and page
/// distances, so a model can be asked about files, devices and loads unlike its training.
pub const READAHEAD_SCHEMA_V3: &str = "iolearn-readahead-v3";

/// How many of [`READAHEAD_FEATURES_V3`] a v3 model file that names none reads: the first
/// seven, those there were before `marker_share` (such files were written before models named
/// their inputs).
pub const READAHEAD_FEATURES_V3_UNNAMED: usize = 7;

/// [`READAHEAD_SCHEMA_V3`]'s feature vector, in order.
pub const READAHEAD_FEATURES_V3: [&str; 8] = [
    "direction",
    "regularity",
    "randomness",
    "density",
    "ra_log2_kb_over_13",
    "read_in_per_access",
    "misses_per_access",
    "marker_share",
];

/// KML's classes (code release ids) and their readahead in KiB (KML's sectors / 2):
/// readrandom 16, readrandomwriterandom 16, readseq 640, readreverse 960 sectors.
pub const READAHEAD_CLASSES: [(&str, i64); 4] = [
    ("readrandom", 8),
    ("readrandomwriterandom", 8),
    ("readseq", 320),
    ("readreverse", 480),
];

/// Parse whitespace-separated decimals; errors carry the 1-based line number.
pub fn parse_numbers(text: &str) -> Result<Vec<f64>> {
    let mut out = Vec::new();
    for (no, line) in text.lines().enumerate() {
        for tok in line.split(|c: char| c.is_whitespace() || c == ',') {
            if tok.is_empty() {
                continue;
            }
            let v: f64 = tok
                .parse()
                .map_err(|_| Error::parse(no + 1, alloc::format!("{} is not a number", crate::error::quote(tok))))?;
            // Weights are stored as f32: a value finite in f64 may still overflow there.
            if !v.is_finite() || !(v as f32).is_finite() {
                return Err(Error::parse(
                    no + 1,
                    alloc::format!("{} is not a finite 32-bit number", crate::error::quote(tok)),
                ));
            }
            out.push(v);
        }
    }
    Ok(out)
}

fn expect_len(field: &'static str, v: Vec<f64>, n: usize) -> Result<Vec<f32>> {
    if v.len() != n {
        return Err(Error::Shape {
            what: field,
            expected: n,
            found: v.len(),
        });
    }
    Ok(v.into_iter().map(|x| x as f32).collect())
}

/// The texts of KML's `nn_arch_data` files.
#[derive(Debug, Clone, Default)]
pub struct NetworkTexts {
    /// `linear{0,1,2}_w.csv`, out x in each.
    pub weights: [String; 3],
    /// `linear{0,1,2}_bias.csv`.
    pub biases: [String; 3],
    /// `mean.csv`.
    pub mean: String,
    /// `stddev.csv`.
    pub stddev: String,
}

/// Shapes of KML's readahead network: (in, out) of each Linear layer.
const SHAPES: [(usize, usize); 3] = [(5, 15), (15, 5), (5, 4)];

/// Which file of `NetworkTexts` an error is in, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkPart {
    /// `linearN_w.csv`.
    Weight(usize),
    /// `linearN_bias.csv`.
    Bias(usize),
    /// `mean.csv`.
    Mean,
    /// `stddev.csv`.
    Stddev,
}

impl NetworkPart {
    /// The file name KML uses for this part.
    pub fn file_name(self) -> String {
        match self {
            NetworkPart::Weight(i) => alloc::format!("linear{i}_w.csv"),
            NetworkPart::Bias(i) => alloc::format!("linear{i}_bias.csv"),
            NetworkPart::Mean => "mean.csv".to_string(),
            NetworkPart::Stddev => "stddev.csv".to_string(),
        }
    }
}

/// Build the readahead model file from KML's texts. On error, also says which part failed.
pub fn import_network_texts(t: &NetworkTexts) -> core::result::Result<ModelFile, (NetworkPart, Error)> {
    let mut layers = Vec::new();
    for (i, &(din, dout)) in SHAPES.iter().enumerate() {
        let w = parse_numbers(&t.weights[i])
            .and_then(|v| expect_len("weight count", v, din * dout))
            .map_err(|e| (NetworkPart::Weight(i), e))?;
        let b = parse_numbers(&t.biases[i])
            .and_then(|v| expect_len("bias count", v, dout))
            .map_err(|e| (NetworkPart::Bias(i), e))?;
        layers.push(Layer::Linear(Linear::from_out_in(din, dout, &w, b)));
        if i < 2 {
            layers.push(Layer::Sigmoid);
        }
    }
    let mean = parse_numbers(&t.mean)
        .and_then(check5)
        .map_err(|e| (NetworkPart::Mean, e))?;
    let std = parse_numbers(&t.stddev)
        .and_then(check5)
        .map_err(|e| (NetworkPart::Stddev, e))?;
    let norm = ZScore::new(mean, std).map_err(|e| (NetworkPart::Stddev, e))?;
    let net = Sequential::new(5, layers).map_err(|e| (NetworkPart::Weight(0), e))?;
    Ok(readahead_file(ModelKind::Mlp(net), norm, "kml nn_arch_data"))
}

fn check5(v: Vec<f64>) -> Result<Vec<f64>> {
    if v.len() != 5 {
        return Err(Error::Shape {
            what: "statistics count",
            expected: 5,
            found: v.len(),
        });
    }
    Ok(v)
}

/// Build the readahead tree model file from KML's `readahead_model.dt` text and the
/// normaliser the tree's thresholds are expressed in (KML's `mean.csv` / `stddev.csv`).
pub fn import_tree_text(dt: &str, norm: ZScore) -> Result<ModelFile> {
    let tree = DecisionTree::import_text(dt, 5, 4)?;
    if norm.dim() != 5 {
        return Err(Error::Shape {
            what: "normaliser width",
            expected: 5,
            found: norm.dim(),
        });
    }
    Ok(readahead_file(ModelKind::Tree(tree), norm, "kml readahead_model.dt"))
}

fn readahead_file(kind: ModelKind, norm: ZScore, source: &str) -> ModelFile {
    let mut f = readahead_model(kind, &READAHEAD_CLASSES);
    f.normaliser = Some(norm);
    f.meta = alloc::vec![("source".to_string(), source.to_string())];
    f
}

/// A readahead model file for `kind` (schema `kml-readahead-v1`, KML's five features, or for
/// a model of seven inputs `iolearn-readahead-v2`; no normaliser): class `i` is `classes[i]`,
/// a label and the `read_ahead_kb` it sets.
pub fn readahead_model(kind: ModelKind, classes: &[(&str, i64)]) -> ModelFile {
    // Seven inputs: iolearn's schema (KML's five, direction, regularity).
    let (schema, names): (&str, &[&str]) = if kind.in_dim() == READAHEAD_FEATURES_V2.len() {
        (READAHEAD_SCHEMA_V2, &READAHEAD_FEATURES_V2)
    } else {
        (READAHEAD_SCHEMA, &READAHEAD_FEATURES)
    };
    let mut f = ModelFile::new(kind, schema);
    f.features = names.iter().map(|s| s.to_string()).collect();
    f.classes = classes
        .iter()
        .map(|&(l, a)| ClassAction {
            label: l.to_string(),
            action: a,
        })
        .collect();
    f.action_unit = "read_ahead_kb".to_string();
    f
}

#[cfg(feature = "std")]
mod files {
    use super::*;
    use std::path::Path;

    /// KML's files are a few KiB; 64 MiB is far above any and far below harm.
    fn read(path: &Path) -> Result<String> {
        iolearn_safeio::read_to_string(path, 64 << 20).map_err(|e| Error::Io {
            path: path.to_path_buf(),
            reason: e.reason,
        })
    }

    /// Import KML's network from an `nn_arch_data` directory. Errors name the file at fault.
    pub fn import_network(dir: &Path) -> Result<ModelFile> {
        let mut t = NetworkTexts::default();
        for i in 0..3 {
            t.weights[i] = read(&dir.join(NetworkPart::Weight(i).file_name()))?;
            t.biases[i] = read(&dir.join(NetworkPart::Bias(i).file_name()))?;
        }
        t.mean = read(&dir.join("mean.csv"))?;
        t.stddev = read(&dir.join("stddev.csv"))?;
        import_network_texts(&t).map_err(|(part, e)| e.in_file(dir.join(part.file_name())))
    }

    /// Import KML's decision tree; the normaliser comes from `mean.csv` / `stddev.csv` in
    /// `nn_arch_data`.
    pub fn import_tree(dt: &Path, nn_arch_data: &Path) -> Result<ModelFile> {
        let stat = |name: &str| -> Result<Vec<f64>> {
            let p = nn_arch_data.join(name);
            parse_numbers(&read(&p)?).and_then(check5).map_err(|e| e.in_file(p))
        };
        let norm = ZScore::new(stat("mean.csv")?, stat("stddev.csv")?)?;
        import_tree_text(&read(dt)?, norm).map_err(|e| e.in_file(dt))
    }
}

#[cfg(feature = "std")]
pub use files::{import_network, import_tree};
