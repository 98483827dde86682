//! The iolearn model file: one versioned, checksummed binary format for every model, and a
//! human-readable JSON dump. The byte layout is documented in `docs/formats.md`.
//!
//! Loading checks, in order: magic, version, declared length (truncation), CRC-32 (corruption),
//! then every field while decoding (bounds, shapes, consistency). Any failure is an [`Error`]
//! naming what is wrong; decoding never panics (the `fuzz/` target checks this).
//!
//! ```
//! use iolearn_ml::{MlpBuilder, ModelFile, ModelKind};
//! let net = MlpBuilder::new(3).output(2).build();
//! let file = ModelFile::new(ModelKind::Mlp(net), "example-v1");
//! let bytes = file.to_bytes();
//! assert_eq!(ModelFile::from_bytes(&bytes).unwrap(), file);
//! let mut bad = bytes.clone();
//! bad[20] ^= 1;
//! assert!(ModelFile::from_bytes(&bad).is_err());
//! ```

use crate::layer::{Layer, Linear};
use crate::net::Sequential;
use crate::norm::ZScore;
use crate::tree::{DecisionTree, Node};
use crate::{Error, Result};
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// First bytes of every model file.
pub const MAGIC: [u8; 4] = *b"IOLM";
/// Format version written by this build (and the newest it reads).
pub const VERSION: u16 = 1;
/// The largest model file [`ModelFile::load`] reads: far above any model that fits an I/O path
/// (KML's network is 1.5 KiB), far below what would hurt the machine.
pub const MAX_FILE_BYTES: u64 = 64 << 20;
/// Feature schemas whose input width is fixed, by name: a model of another width is refused on
/// save and on load (it would fail at its first decision). `iolearn-policy` tests that these
/// match its feature extractors. `iolearn-readahead-v3` is not among them: its model reads the
/// scale-free inputs its file names ([`crate::kml::READAHEAD_FEATURES_V3`], the first seven
/// when it names none), checked by [`ModelFile::validate`].
pub const SCHEMA_WIDTHS: [(&str, usize); 5] = [
    ("kml-readahead-v1", 5),
    ("iolearn-readahead-v2", 7),
    ("linnos-31", 31),
    ("mittos-9", 9),
    ("iolearn-tail-v1", 13),
];
/// The widest layer, input or class set a model file may declare.
pub const MAX_WIDTH: usize = 1 << 16;
/// The largest class action accepted for the `read_ahead_kb` unit (1 GiB of readahead).
pub const MAX_READ_AHEAD_KB: i64 = 1 << 20;
/// Bytes before the body: magic, version, kind, reserved, total length.
const HEADER: usize = 4 + 2 + 1 + 1 + 4;

/// The model inside a file.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelKind {
    /// A neural network.
    Mlp(Sequential),
    /// A decision tree.
    Tree(DecisionTree),
}

impl ModelKind {
    fn tag(&self) -> u8 {
        match self {
            ModelKind::Mlp(_) => 1,
            ModelKind::Tree(_) => 2,
        }
    }

    /// `"mlp"` or `"tree"`.
    pub fn name(&self) -> &'static str {
        match self {
            ModelKind::Mlp(_) => "mlp",
            ModelKind::Tree(_) => "tree",
        }
    }

    /// Input width.
    pub fn in_dim(&self) -> usize {
        match self {
            ModelKind::Mlp(n) => n.in_dim(),
            ModelKind::Tree(t) => t.n_features(),
        }
    }

    /// Number of classes (outputs for a regression network).
    pub fn n_outputs(&self) -> usize {
        match self {
            ModelKind::Mlp(n) => n.out_dim(),
            ModelKind::Tree(t) => t.n_classes(),
        }
    }

    /// Bytes the model occupies in memory.
    pub fn bytes(&self) -> usize {
        match self {
            ModelKind::Mlp(n) => n.bytes(),
            ModelKind::Tree(t) => t.bytes(),
        }
    }
}

/// What a predicted class means to the controller: a name and the action value (for
/// readahead: `read_ahead_kb`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassAction {
    /// Class name, e.g. `readseq`.
    pub label: String,
    /// Action value in [`ModelFile::action_unit`] units.
    pub action: i64,
}

/// A model with everything needed to use it safely: feature schema, normaliser, class -> action
/// map, and free-form metadata (seed, data source).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelFile {
    /// The model.
    pub kind: ModelKind,
    /// Name of the feature schema the model was trained on (e.g. `kml-readahead-v1`).
    pub schema: String,
    /// Feature names in input order (empty, or one per input).
    pub features: Vec<String>,
    /// Normaliser applied to raw features before the model.
    pub normaliser: Option<ZScore>,
    /// Class -> action map (empty, or one per class).
    pub classes: Vec<ClassAction>,
    /// Unit of the actions (e.g. `read_ahead_kb`).
    pub action_unit: String,
    /// Key/value metadata (e.g. `seed`, `source`).
    pub meta: Vec<(String, String)>,
}

impl ModelFile {
    /// A file with only a model and a schema name.
    pub fn new(kind: ModelKind, schema: &str) -> Self {
        ModelFile {
            kind,
            schema: schema.to_string(),
            features: Vec::new(),
            normaliser: None,
            classes: Vec::new(),
            action_unit: String::new(),
            meta: Vec::new(),
        }
    }

    /// Error unless the model was trained for `schema`.
    pub fn expect_schema(&self, schema: &str) -> Result<()> {
        if self.schema == schema {
            Ok(())
        } else {
            Err(Error::SchemaMismatch {
                expected: schema.to_string(),
                found: self.schema.clone(),
            })
        }
    }

    /// Check that the parts fit together (feature names, normaliser, classes vs the model).
    pub fn validate(&self) -> Result<()> {
        let d = self.kind.in_dim();
        if !self.features.is_empty() && self.features.len() != d {
            return Err(Error::Shape {
                what: "feature names",
                expected: d,
                found: self.features.len(),
            });
        }
        if let Some(z) = &self.normaliser {
            if z.dim() != d {
                return Err(Error::Shape {
                    what: "normaliser width",
                    expected: d,
                    found: z.dim(),
                });
            }
        }
        if !self.classes.is_empty() && self.classes.len() != self.kind.n_outputs().max(2) {
            return Err(Error::Shape {
                what: "class map entries",
                expected: self.kind.n_outputs().max(2),
                found: self.classes.len(),
            });
        }
        if self.schema.is_empty() {
            return Err(Error::invalid("schema", "empty feature-schema name"));
        }
        if self.schema == crate::kml::READAHEAD_SCHEMA_V3 {
            let all = &crate::kml::READAHEAD_FEATURES_V3;
            let unnamed = crate::kml::READAHEAD_FEATURES_V3_UNNAMED;
            if self.features.is_empty() && d != unnamed {
                return Err(Error::invalid(
                    "features",
                    alloc::format!(
                        "{} without feature names takes the first {unnamed} inputs ({}) but the model has {d}",
                        self.schema,
                        all[..unnamed].join(", ")
                    ),
                ));
            }
            for (k, name) in self.features.iter().enumerate() {
                let twice = self.features[..k].contains(name);
                if twice || !all.contains(&name.as_str()) {
                    return Err(Error::invalid(
                        "features",
                        alloc::format!(
                            "{} reads each of {} at most once, not {name:?}{}",
                            self.schema,
                            all.join(", "),
                            if twice { " twice" } else { "" }
                        ),
                    ));
                }
            }
        }
        if let Some(&(_, width)) = SCHEMA_WIDTHS.iter().find(|(name, _)| *name == self.schema) {
            if d != width {
                return Err(Error::invalid(
                    "schema",
                    alloc::format!("{} takes {width} inputs but the model has {d}", self.schema),
                ));
            }
        }
        if let Some(z) = &self.normaliser {
            crate::norm::check_statistics(&z.mean, &z.std)?;
        }
        let finite = match &self.kind {
            ModelKind::Mlp(n) => n.layers().iter().all(|l| match l {
                Layer::Linear(l) => l.weight_out_in().iter().chain(&l.bias).all(|v| v.is_finite()),
                _ => true,
            }),
            ModelKind::Tree(t) => t.nodes().iter().all(|n| match n {
                Node::Split { threshold, .. } => threshold.is_finite(),
                Node::Leaf { .. } => true,
            }),
        };
        if !finite {
            return Err(Error::invalid(
                "weights",
                "NaN or infinite values (training diverged: lower the learning rate or scale the inputs)",
            ));
        }
        if self.action_unit == "read_ahead_kb" {
            if let Some(c) = self
                .classes
                .iter()
                .find(|c| !(0..=MAX_READ_AHEAD_KB).contains(&c.action))
            {
                return Err(Error::invalid(
                    "class action",
                    alloc::format!(
                        "class {:?} maps to read_ahead_kb {} (must be 0 to {MAX_READ_AHEAD_KB})",
                        c.label,
                        c.action
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Look up a metadata value.
    pub fn meta(&self, key: &str) -> Option<&str> {
        self.meta.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Encode to bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Vec::with_capacity(256);
        w.extend_from_slice(&MAGIC);
        w.extend_from_slice(&VERSION.to_le_bytes());
        w.push(self.kind.tag());
        w.push(0);
        w.extend_from_slice(&0u32.to_le_bytes()); // total length, patched by `reseal`
        put_str(&mut w, &self.schema);
        put_u32(&mut w, self.features.len() as u32);
        for f in &self.features {
            put_str(&mut w, f);
        }
        match &self.normaliser {
            None => w.push(0),
            Some(z) => {
                // Flag 1: plain Z-score; flag 2: Z-score after log1p on the marked features.
                w.push(if z.log1p.is_empty() { 1 } else { 2 });
                put_u32(&mut w, z.dim() as u32);
                z.mean
                    .iter()
                    .chain(&z.std)
                    .for_each(|v| w.extend_from_slice(&v.to_le_bytes()));
                if !z.log1p.is_empty() {
                    w.extend(z.log1p.iter().map(|&b| b as u8));
                }
            }
        }
        put_u32(&mut w, self.classes.len() as u32);
        for c in &self.classes {
            put_str(&mut w, &c.label);
            w.extend_from_slice(&c.action.to_le_bytes());
        }
        put_str(&mut w, &self.action_unit);
        put_u32(&mut w, self.meta.len() as u32);
        for (k, v) in &self.meta {
            put_str(&mut w, k);
            put_str(&mut w, v);
        }
        match &self.kind {
            ModelKind::Mlp(net) => {
                put_u32(&mut w, net.in_dim() as u32);
                put_u32(&mut w, net.layers().len() as u32);
                for l in net.layers() {
                    match l {
                        Layer::Linear(l) => {
                            w.push(1);
                            put_u32(&mut w, l.in_dim as u32);
                            put_u32(&mut w, l.out_dim as u32);
                            l.weight
                                .iter()
                                .chain(&l.bias)
                                .for_each(|v| w.extend_from_slice(&v.to_le_bytes()));
                        }
                        Layer::Sigmoid => w.push(2),
                        Layer::ReLU => w.push(3),
                        Layer::Tanh => w.push(4),
                        Layer::Softmax => w.push(5),
                    }
                }
            }
            ModelKind::Tree(t) => {
                put_u32(&mut w, t.n_features() as u32);
                put_u32(&mut w, t.n_classes() as u32);
                put_u32(&mut w, t.nodes().len() as u32);
                for n in t.nodes() {
                    match *n {
                        Node::Split {
                            feature,
                            threshold,
                            left,
                            right,
                        } => {
                            w.push(1);
                            put_u32(&mut w, feature);
                            w.extend_from_slice(&threshold.to_le_bytes());
                            put_u32(&mut w, left);
                            put_u32(&mut w, right);
                        }
                        Node::Leaf { class } => {
                            w.push(2);
                            put_u32(&mut w, class);
                        }
                    }
                }
                let proba = t.leaf_proba();
                w.push(u8::from(!proba.is_empty()));
                proba.iter().for_each(|v| w.extend_from_slice(&v.to_le_bytes()));
            }
        }
        w.extend_from_slice(&[0; 4]); // CRC, patched by `reseal`
        reseal(&mut w);
        w
    }

    /// Read and decode a model file. Errors name the file: [`Error::Io`] when it cannot be
    /// read (or is larger than [`MAX_FILE_BYTES`]), [`Error::InFile`] when its contents are bad.
    #[cfg(feature = "std")]
    pub fn load(path: impl AsRef<std::path::Path>) -> Result<Self> {
        let path = path.as_ref();
        let bytes = iolearn_safeio::read(path, MAX_FILE_BYTES).map_err(|e| Error::Io {
            path: path.into(),
            reason: e.reason,
        })?;
        Self::from_bytes(&bytes).map_err(|e| e.in_file(path))
    }

    /// Check the model ([`ModelFile::validate`]) and write it atomically with
    /// [`iolearn_safeio::write`]: an error or a crash leaves the old file or none, never half a
    /// file, and a link or device at `path` is never followed or replaced. Returns the bytes
    /// written.
    #[cfg(feature = "std")]
    pub fn save(&self, path: impl AsRef<std::path::Path>) -> Result<usize> {
        let path = path.as_ref();
        self.validate()?;
        let bytes = self.to_bytes();
        iolearn_safeio::write(path, &bytes).map_err(|e| Error::Io {
            path: path.into(),
            reason: e.reason,
        })?;
        Ok(bytes.len())
    }

    /// Decode bytes written by [`ModelFile::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.len() < 4 {
            return Err(Error::Truncated { field: "magic" });
        }
        if bytes[..4] != MAGIC {
            return Err(Error::BadMagic);
        }
        if bytes.len() < HEADER + 4 {
            return Err(Error::Truncated { field: "header" });
        }
        let version = u16::from_le_bytes([bytes[4], bytes[5]]);
        if version == 0 || version > VERSION {
            return Err(Error::UnsupportedVersion {
                found: version,
                supported: VERSION,
            });
        }
        if bytes[7] != 0 {
            return Err(Error::invalid(
                "reserved header byte",
                alloc::format!("{} (must be 0 in version {VERSION})", bytes[7]),
            ));
        }
        let declared = u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
        if bytes.len() < declared {
            return Err(Error::Truncated {
                field: "body (file shorter than its header says)",
            });
        }
        if bytes.len() > declared {
            return Err(Error::invalid(
                "length",
                alloc::format!("{} bytes after the end of the model", bytes.len() - declared),
            ));
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        let stored = u32::from_le_bytes(crc.try_into().unwrap());
        let computed = crc32(body);
        if stored != computed {
            return Err(Error::ChecksumMismatch { stored, computed });
        }
        let mut r = Reader { buf: body, pos: HEADER };
        let tag = bytes[6];
        let schema = r.str("schema")?;
        let nf = r.count("feature count", 2)?;
        let features = (0..nf).map(|_| r.str("feature name")).collect::<Result<Vec<_>>>()?;
        let normaliser = match r.u8("normaliser flag")? {
            0 => None,
            flag @ (1 | 2) => {
                let d = r.count("normaliser width", 16)?;
                let mean = (0..d).map(|_| r.f64("normaliser mean")).collect::<Result<Vec<_>>>()?;
                let std = (0..d).map(|_| r.f64("normaliser std")).collect::<Result<Vec<_>>>()?;
                let z = ZScore::new(mean, std)?;
                if flag == 2 {
                    let mask = (0..d)
                        .map(|_| match r.u8("normaliser log1p mask")? {
                            0 => Ok(false),
                            1 => Ok(true),
                            v => Err(Error::invalid(
                                "normaliser log1p mask",
                                alloc::format!("{v} (expected 0 or 1)"),
                            )),
                        })
                        .collect::<Result<Vec<_>>>()?;
                    if !mask.contains(&true) {
                        return Err(Error::invalid("normaliser log1p mask", "flag 2 with no feature marked"));
                    }
                    Some(z.with_log1p(mask)?)
                } else {
                    Some(z)
                }
            }
            v => {
                return Err(Error::invalid(
                    "normaliser flag",
                    alloc::format!("{v} (expected 0, 1 or 2)"),
                ))
            }
        };
        let nc = r.count("class count", 10)?;
        let mut classes = Vec::with_capacity(nc);
        for _ in 0..nc {
            classes.push(ClassAction {
                label: r.str("class label")?,
                action: r.i64("class action")?,
            });
        }
        let action_unit = r.str("action unit")?;
        let nm = r.count("metadata count", 4)?;
        let mut meta = Vec::with_capacity(nm);
        for _ in 0..nm {
            meta.push((r.str("metadata key")?, r.str("metadata value")?));
        }
        let kind = match tag {
            1 => ModelKind::Mlp(read_mlp(&mut r)?),
            2 => ModelKind::Tree(read_tree(&mut r)?),
            t => return Err(Error::invalid("model kind", alloc::format!("unknown kind tag {t}"))),
        };
        if r.pos != body.len() {
            return Err(Error::invalid("length", "unread bytes after the model"));
        }
        let file = ModelFile {
            kind,
            schema,
            features,
            normaliser,
            classes,
            action_unit,
            meta,
        };
        file.validate()?;
        Ok(file)
    }

    /// A human-readable JSON rendering of the whole file (weights included), by `serde_json`
    /// (non-finite numbers, which a valid model never holds, become `null`).
    pub fn to_json(&self) -> String {
        let body = match &self.kind {
            ModelKind::Mlp(net) => json::Body::Mlp {
                in_dim: net.in_dim(),
                layers: net
                    .layers()
                    .iter()
                    .map(|l| match l {
                        Layer::Linear(l) => json::Layer {
                            kind: "linear",
                            linear: Some(json::Linear {
                                r#in: l.in_dim,
                                out: l.out_dim,
                                weight_out_in: l.weight_out_in(),
                                bias: l.bias.clone(),
                            }),
                        },
                        other => json::Layer {
                            kind: other.name(),
                            linear: None,
                        },
                    })
                    .collect(),
            },
            ModelKind::Tree(t) => json::Body::Tree {
                n_features: t.n_features(),
                n_classes: t.n_classes(),
                nodes: t.nodes().to_vec(),
            },
        };
        let doc = json::File {
            format_version: VERSION,
            kind: self.kind.name(),
            schema: &self.schema,
            features: &self.features,
            normaliser: self.normaliser.as_ref().map(|z| json::ZScore {
                kind: "zscore",
                mean: &z.mean,
                std: &z.std,
                log1p: if z.log1p.is_empty() { None } else { Some(&z.log1p) },
            }),
            classes: self
                .classes
                .iter()
                .map(|c| json::Class {
                    label: &c.label,
                    action: c.action,
                })
                .collect(),
            action_unit: &self.action_unit,
            meta: json::Pairs(&self.meta),
            body,
        };
        let mut s = serde_json::to_string_pretty(&doc).expect("a model serialises to JSON");
        s.push('\n');
        s
    }
}

/// The JSON view of a model file (`ModelFile::to_json`).
mod json {
    use alloc::string::String;
    use alloc::vec::Vec;
    use serde::ser::SerializeMap;
    use serde::Serialize;

    #[derive(Serialize)]
    pub(super) struct File<'a> {
        pub format_version: u16,
        pub kind: &'static str,
        pub schema: &'a str,
        pub features: &'a [String],
        pub normaliser: Option<ZScore<'a>>,
        pub classes: Vec<Class<'a>>,
        pub action_unit: &'a str,
        pub meta: Pairs<'a>,
        #[serde(flatten)]
        pub body: Body,
    }

    #[derive(Serialize)]
    pub(super) struct ZScore<'a> {
        #[serde(rename = "type")]
        pub kind: &'static str,
        pub mean: &'a [f64],
        pub std: &'a [f64],
        #[serde(skip_serializing_if = "Option::is_none")]
        pub log1p: Option<&'a [bool]>,
    }

    #[derive(Serialize)]
    pub(super) struct Class<'a> {
        pub label: &'a str,
        pub action: i64,
    }

    /// Metadata as a JSON object in file order.
    pub(super) struct Pairs<'a>(pub &'a [(String, String)]);

    impl Serialize for Pairs<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut m = s.serialize_map(Some(self.0.len()))?;
            for (k, v) in self.0 {
                m.serialize_entry(k, v)?;
            }
            m.end()
        }
    }

    #[derive(Serialize)]
    #[serde(untagged)]
    pub(super) enum Body {
        Mlp {
            in_dim: usize,
            layers: Vec<Layer>,
        },
        Tree {
            n_features: usize,
            n_classes: usize,
            nodes: Vec<crate::tree::Node>,
        },
    }

    #[derive(Serialize)]
    pub(super) struct Layer {
        #[serde(rename = "type")]
        pub kind: &'static str,
        #[serde(flatten, skip_serializing_if = "Option::is_none")]
        pub linear: Option<Linear>,
    }

    #[derive(Serialize)]
    pub(super) struct Linear {
        pub r#in: usize,
        pub out: usize,
        pub weight_out_in: Vec<f32>,
        pub bias: Vec<f32>,
    }
}

/// Recompute the length and CRC fields of an encoded model in place. `to_bytes` uses it; tests
/// and the fuzzer use it to build files that pass the checksum and reach the field decoder.
pub fn reseal(buf: &mut [u8]) {
    if buf.len() < HEADER + 4 {
        return;
    }
    let n = buf.len();
    buf[8..12].copy_from_slice(&(n as u32).to_le_bytes());
    let crc = crc32(&buf[..n - 4]);
    buf[n - 4..].copy_from_slice(&crc.to_le_bytes());
}

fn read_mlp(r: &mut Reader) -> Result<Sequential> {
    let in_dim = r.width("input width")?;
    let nl = r.count("layer count", 1)?;
    if nl == 0 {
        return Err(Error::invalid("layer count", "a network needs at least one layer"));
    }
    let mut layers = Vec::with_capacity(nl);
    for _ in 0..nl {
        layers.push(match r.u8("layer type")? {
            1 => {
                let i = r.width("linear input width")?;
                let o = r.width("linear output width")?;
                let n = i
                    .checked_mul(o)
                    .and_then(|n| n.checked_add(o))
                    .ok_or(Error::invalid("linear layer", "size overflows"))?;
                if n > r.remaining() / 4 {
                    return Err(Error::Truncated {
                        field: "linear weights",
                    });
                }
                let mut vals = (0..n).map(|_| r.f32("linear weights")).collect::<Result<Vec<_>>>()?;
                if vals.iter().any(|v| !v.is_finite()) {
                    return Err(Error::invalid("linear weights", "NaN or infinite weight"));
                }
                let bias = vals.split_off(i * o);
                Layer::Linear(Linear {
                    in_dim: i,
                    out_dim: o,
                    weight: vals.into(),
                    bias,
                })
            }
            2 => Layer::Sigmoid,
            3 => Layer::ReLU,
            4 => Layer::Tanh,
            5 => Layer::Softmax,
            t => return Err(Error::invalid("layer type", alloc::format!("unknown layer tag {t}"))),
        });
    }
    Sequential::new(in_dim, layers)
}

fn read_tree(r: &mut Reader) -> Result<DecisionTree> {
    let nf = r.width("tree feature count")?;
    let nc = r.width("tree class count")?;
    let nn = r.count("tree node count", 5)?;
    let mut nodes = Vec::with_capacity(nn);
    for _ in 0..nn {
        nodes.push(match r.u8("tree node type")? {
            1 => Node::Split {
                feature: r.u32("split feature")?,
                threshold: r.f32("split threshold")?,
                left: r.u32("left child")?,
                right: r.u32("right child")?,
            },
            2 => Node::Leaf {
                class: r.u32("leaf class")?,
            },
            t => return Err(Error::invalid("tree node type", alloc::format!("unknown node tag {t}"))),
        });
    }
    let mut tree = DecisionTree::from_nodes(nodes, nf, nc)?;
    match r.u8("leaf probability flag")? {
        0 => {}
        1 => {
            let n = nn
                .checked_mul(nc)
                .filter(|&n| n <= r.remaining() / 4)
                .ok_or(Error::Truncated {
                    field: "leaf probabilities",
                })?;
            let p = (0..n)
                .map(|_| r.f32("leaf probabilities"))
                .collect::<Result<Vec<_>>>()?;
            tree.set_leaf_proba(p)?;
        }
        v => {
            return Err(Error::invalid(
                "leaf probability flag",
                alloc::format!("{v} (expected 0 or 1)"),
            ))
        }
    }
    Ok(tree)
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize, field: &'static str) -> Result<&[u8]> {
        if self.remaining() < n {
            return Err(Error::Truncated { field });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn u8(&mut self, f: &'static str) -> Result<u8> {
        Ok(self.take(1, f)?[0])
    }

    fn u32(&mut self, f: &'static str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4, f)?.try_into().unwrap()))
    }

    /// A count of items each at least `min_item` bytes long: rejected early if the rest of the
    /// file cannot hold them, so a corrupt count cannot trigger a huge allocation.
    /// A width (inputs, outputs, classes): 1 to [`MAX_WIDTH`]. Widths size the buffers that
    /// inference allocates, so a 40-byte file must not be able to ask for gigabytes.
    fn width(&mut self, f: &'static str) -> Result<usize> {
        let n = self.u32(f)? as usize;
        if !(1..=MAX_WIDTH).contains(&n) {
            return Err(Error::invalid(f, alloc::format!("{n} (must be 1 to {MAX_WIDTH})")));
        }
        Ok(n)
    }

    fn count(&mut self, f: &'static str, min_item: usize) -> Result<usize> {
        let n = self.u32(f)? as usize;
        if n.saturating_mul(min_item) > self.remaining() {
            return Err(Error::Truncated { field: f });
        }
        Ok(n)
    }

    fn i64(&mut self, f: &'static str) -> Result<i64> {
        Ok(i64::from_le_bytes(self.take(8, f)?.try_into().unwrap()))
    }

    fn f32(&mut self, f: &'static str) -> Result<f32> {
        Ok(f32::from_le_bytes(self.take(4, f)?.try_into().unwrap()))
    }

    fn f64(&mut self, f: &'static str) -> Result<f64> {
        Ok(f64::from_le_bytes(self.take(8, f)?.try_into().unwrap()))
    }

    fn str(&mut self, f: &'static str) -> Result<String> {
        let n = u16::from_le_bytes(self.take(2, f)?.try_into().unwrap()) as usize;
        let b = self.take(n, f)?;
        core::str::from_utf8(b)
            .map(|s| s.to_string())
            .map_err(|_| Error::invalid(f, "not UTF-8"))
    }
}

fn put_u32(w: &mut Vec<u8>, v: u32) {
    w.extend_from_slice(&v.to_le_bytes());
}

fn put_str(w: &mut Vec<u8>, s: &str) {
    // Strings are names and short metadata; longer ones are cut at a character boundary.
    let mut end = s.len().min(u16::MAX as usize);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    w.extend_from_slice(&(end as u16).to_le_bytes());
    w.extend_from_slice(&s.as_bytes()[..end]);
}

/// CRC-32 (IEEE 802.3, as zlib's `crc32`), by `crc32fast` (no_std, SIMD where available).
pub fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}
