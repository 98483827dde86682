//! Decision trees: CART induction, allocation-free inference, and scikit-learn `export_text`
//! export and import (the format of KML's `readahead_model.dt`).

use crate::kernels::{SplitBlock, Survivors, TreeLayout, PAIR_ZERO_LANE, SURVIVOR_BITS};
use crate::{math, Error, Result};
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

/// Deepest tree accepted from a file or text; recursion over trees is bounded by it.
pub const MAX_DEPTH: usize = 1024;

/// Split quality measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Criterion {
    /// Gini impurity.
    Gini,
    /// Shannon entropy (information gain).
    Entropy,
}

/// Induction settings; defaults match scikit-learn's `DecisionTreeClassifier`.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeConfig {
    /// Split quality measure (default Gini).
    pub criterion: Criterion,
    /// Deepest level allowed, root = 0 (default: unlimited).
    pub max_depth: Option<usize>,
    /// Fewest samples a node needs to be split (default 2).
    pub min_samples_split: usize,
    /// Fewest samples each child must keep (default 1).
    pub min_samples_leaf: usize,
}

impl Default for TreeConfig {
    fn default() -> Self {
        TreeConfig {
            criterion: Criterion::Gini,
            max_depth: None,
            min_samples_split: 2,
            min_samples_leaf: 1,
        }
    }
}

/// One node. A split sends `x[feature] <= threshold` to `left`. Serialises (the model file's
/// JSON dump) as `{"feature", "threshold", "left", "right"}` or `{"class"}`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum Node {
    /// Internal node.
    Split {
        /// Feature index.
        feature: u32,
        /// Threshold.
        threshold: f32,
        /// Child for `x[feature] <= threshold`.
        left: u32,
        /// Child for `x[feature] > threshold`.
        right: u32,
    },
    /// Leaf predicting `class`.
    Leaf {
        /// Predicted class.
        class: u32,
    },
}

/// A classification tree stored as a flat node array, root at index 0.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionTree {
    nodes: Vec<Node>,
    n_features: usize,
    n_classes: usize,
    /// Class fractions per node (`nodes.len() * n_classes`), kept for trained trees; empty for
    /// imported ones, whose `predict_proba` is then one-hot.
    proba: Vec<f32>,
    /// The same tree laid out for branch-free evaluation (empty when it does not fit).
    scorer: Scorer,
}

/// A tree of at most [`Scorer::MAX_LEAVES`] leaves over at most 8 features, laid out for
/// QuickScorer's branch-free evaluation (Lucchese et al., SIGIR 2015): number the leaves left
/// to right; every split gets a bit mask that clears the leaves of its left subtree. For a row,
/// AND together the masks of the splits whose test sends it right (`!(x[f] <= t)`): the exit
/// leaf is the lowest bit still set. All splits are tested at once with AVX-512 or AVX2
/// (features picked by a lane permute, sixteen or eight splits per compare), so a row costs a
/// fixed, short run of instructions and no branch mispredicts, where a walk from the root
/// mispredicts at nearly every level on varied input. Splits are padded to a multiple of 16
/// with masks that clear nothing. A narrow tree (at most 31 leaves) on AVX-512 ANDs the masks
/// by table instead: the set R of splits the row goes right at, ten bits at a time, picks the
/// AND of those splits' masks from a table of 1,024 (`kernels::Survivors`); its padding splits
/// test a lane that is always zero, so R holds real splits only.
#[derive(Debug, Clone, Default)]
struct Scorer {
    /// The layout (`None` when the tree does not fit). Boxed: 14 KiB, and a tree stays small to
    /// move.
    layout: Option<Box<TreeLayout>>,
    /// The kernels (one row, many rows) for this layout on this CPU (chosen when the layout was
    /// made; without them the tree is walked).
    kernel: Option<crate::kernels::TreeKernels>,
}

/// Layouts are equal when their splits and leaves are (the kernel follows from them).
impl PartialEq for Scorer {
    fn eq(&self, o: &Self) -> bool {
        self.layout == o.layout
    }
}

impl Scorer {
    /// The most leaves the layout takes (two 32-bit mask words).
    const MAX_LEAVES: usize = 64;

    /// The layout of `nodes`, or none when the tree is too large or too wide.
    fn new(nodes: &[Node], n_features: usize) -> Scorer {
        let n_leaves = nodes.iter().filter(|n| matches!(n, Node::Leaf { .. })).count();
        if n_leaves > Self::MAX_LEAVES || n_features > 8 {
            return Scorer::default();
        }
        // Left-to-right leaves, and each split's range of left-subtree leaves.
        let mut leaves: Vec<u64> = Vec::new();
        let mut splits: Vec<(u32, f32, usize, usize)> = Vec::new();
        fn walk(nodes: &[Node], i: usize, leaves: &mut Vec<u64>, splits: &mut Vec<(u32, f32, usize, usize)>) {
            match nodes[i] {
                Node::Leaf { class } => leaves.push((i as u64) << 32 | class as u64),
                Node::Split {
                    feature,
                    threshold,
                    left,
                    right,
                } => {
                    let first = leaves.len();
                    walk(nodes, left as usize, leaves, splits);
                    splits.push((feature, threshold, first, leaves.len()));
                    walk(nodes, right as usize, leaves, splits);
                }
            }
        }
        walk(nodes, 0, &mut leaves, &mut splits);
        // Padding splits test +inf on feature 0 and clear nothing whichever way they go.
        let pad = SplitBlock {
            feature: [0; 16],
            threshold: [f32::INFINITY; 16],
            left_lo: [0; 16],
            left_hi: [0; 16],
        };
        // One entry per index a trailing-zero count can give (it never gives one past the last
        // leaf, but then no bounds check is needed): the last leaf repeated.
        let last = *leaves.last().expect("a tree has a leaf");
        let mut s = Box::new(TreeLayout {
            row_mask: (1u16 << n_features) - 1,
            n_blocks: splits.len().div_ceil(16).max(1),
            n_leaves,
            lanes: core::array::from_fn(|k| if k < n_features { -1 } else { 0 }),
            blocks: [pad; crate::kernels::MAX_BLOCKS],
            pair_lanes: [[PAIR_ZERO_LANE; 16]; 2],
            survivors: Survivors([[u32::MAX; 1 << SURVIVOR_BITS]; 3]),
            leaves: core::array::from_fn(|k| leaves.get(k).copied().unwrap_or(last)),
        });
        for (k, &(f, t, lo, hi)) in splits.iter().enumerate() {
            let left: u64 = (lo..hi).fold(0, |m, leaf| m | 1 << leaf);
            let b = &mut s.blocks[k / 16];
            b.feature[k % 16] = f as i32;
            b.threshold[k % 16] = t;
            b.left_lo[k % 16] = left as u32;
            b.left_hi[k % 16] = (left >> 32) as u32;
            if !s.wide() {
                // At most 30 splits: split k is lane k % 16 of block k / 16 (its feature at its
                // lane in the kernel's two-source row), and bit k % 10 of group k / 10 of the set
                // R the narrow kernel builds; an entry clears the left leaves of every split its
                // group holds.
                s.pair_lanes[k / 16][k % 16] = crate::kernels::pair_lane(f as usize, n_features);
                let bit = k % SURVIVOR_BITS;
                for (group, m) in s.survivors.0[k / SURVIVOR_BITS].iter_mut().enumerate() {
                    if group >> bit & 1 == 1 {
                        *m &= !(left as u32);
                    }
                }
            }
        }
        let kernel = crate::kernels::tree_kernels(&s).first().map(|k| k.1);
        Scorer {
            layout: Some(s),
            kernel,
        }
    }
}

impl DecisionTree {
    /// A tree from nodes; checks that every index is in range and the graph is a tree.
    pub fn from_nodes(nodes: Vec<Node>, n_features: usize, n_classes: usize) -> Result<Self> {
        if nodes.is_empty() {
            return Err(Error::invalid("tree", "no nodes"));
        }
        let mut seen = alloc::vec![false; nodes.len()];
        let mut stack = alloc::vec![(0usize, 0usize)];
        while let Some((i, depth)) = stack.pop() {
            if depth > MAX_DEPTH {
                return Err(Error::invalid("tree", alloc::format!("deeper than {MAX_DEPTH} levels")));
            }
            if seen[i] {
                return Err(Error::invalid("tree", "a node is reachable twice (not a tree)"));
            }
            seen[i] = true;
            match nodes[i] {
                Node::Split {
                    feature,
                    threshold,
                    left,
                    right,
                } => {
                    if feature as usize >= n_features {
                        return Err(Error::invalid(
                            "tree",
                            alloc::format!("node {i} splits on feature {feature}, model has {n_features}"),
                        ));
                    }
                    if threshold.is_nan() {
                        return Err(Error::invalid("tree", alloc::format!("node {i} has a NaN threshold")));
                    }
                    for c in [left, right] {
                        if c as usize >= nodes.len() {
                            return Err(Error::invalid(
                                "tree",
                                alloc::format!("node {i} points to missing node {c}"),
                            ));
                        }
                        stack.push((c as usize, depth + 1));
                    }
                }
                Node::Leaf { class } => {
                    if class as usize >= n_classes {
                        return Err(Error::invalid(
                            "tree",
                            alloc::format!("leaf {i} predicts class {class}, model has {n_classes}"),
                        ));
                    }
                }
            }
        }
        if seen.iter().any(|s| !s) {
            return Err(Error::invalid("tree", "unreachable nodes"));
        }
        Ok(DecisionTree {
            scorer: Scorer::new(&nodes, n_features),
            nodes,
            n_features,
            n_classes,
            proba: Vec::new(),
        })
    }

    /// The nodes, root first.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Number of input features.
    pub fn n_features(&self) -> usize {
        self.n_features
    }

    /// Number of classes.
    pub fn n_classes(&self) -> usize {
        self.n_classes
    }

    /// Class fractions per node (`nodes * classes`), empty when the tree has none.
    pub fn leaf_proba(&self) -> &[f32] {
        &self.proba
    }

    /// Set the class fractions per node (`nodes * classes` values in [0, 1]).
    pub fn set_leaf_proba(&mut self, proba: Vec<f32>) -> Result<()> {
        if !proba.is_empty() && proba.len() != self.nodes.len() * self.n_classes {
            return Err(Error::Shape {
                what: "leaf probabilities",
                expected: self.nodes.len() * self.n_classes,
                found: proba.len(),
            });
        }
        if proba.iter().any(|p| !(0.0..=1.0).contains(p)) {
            return Err(Error::invalid("leaf probabilities", "values must be in [0, 1]"));
        }
        self.proba = proba;
        Ok(())
    }

    /// Depth of the deepest leaf (root alone = 0).
    pub fn depth(&self) -> usize {
        let mut best = 0;
        let mut stack = alloc::vec![(0usize, 0usize)];
        while let Some((i, d)) = stack.pop() {
            best = best.max(d);
            if let Node::Split { left, right, .. } = self.nodes[i] {
                stack.push((left as usize, d + 1));
                stack.push((right as usize, d + 1));
            }
        }
        best
    }

    /// Bytes of memory the tree occupies.
    pub fn bytes(&self) -> usize {
        let sc = &self.scorer.layout;
        core::mem::size_of::<Self>()
            + self.nodes.capacity() * core::mem::size_of::<Node>()
            + self.proba.capacity() * 4
            + sc.as_ref().map_or(0, |_| core::mem::size_of::<TreeLayout>())
    }

    /// Predicted class of one row. No allocation.
    #[inline]
    pub fn predict_class(&self, x: &[f32]) -> usize {
        (self.leaf_packed(x) & 0xffff_ffff) as usize
    }

    /// Predicted classes of many rows at once: `rows` holds `out.len()` rows of `n_features`
    /// values end to end, and `out[k]` gets row k's class, the one [`Self::predict_class`]
    /// gives. Where the branch-free kernel runs, the rows are scored in one loop compiled
    /// with it, so the tree's layout is loaded once for all of them and no call is made per
    /// row (scoring a data set, or every open file's window). No allocation.
    pub fn predict_classes(&self, rows: &[f32], out: &mut [u32]) -> Result<()> {
        let d = self.n_features;
        let expected = out.len().saturating_mul(d);
        if rows.len() != expected {
            return Err(Error::Shape {
                what: "rows (rows x features values)",
                expected,
                found: rows.len(),
            });
        }
        let sc = &self.scorer;
        if let (Some(kernel), Some(layout)) = (sc.kernel, sc.layout.as_deref()) {
            // SAFETY: as in `leaf_packed`, for each of the `out.len()` whole rows of `d` values
            // (checked above) at stride `d`, which covers the lanes the layout loads.
            unsafe { (kernel.rows)(rows, d, layout, out) };
        } else {
            for (k, o) in out.iter_mut().enumerate() {
                *o = self.walk(&rows[k * d..(k + 1) * d]).1 as u32;
            }
        }
        Ok(())
    }

    /// (node index, class) of the leaf `x` reaches.
    #[inline]
    fn leaf(&self, x: &[f32]) -> (usize, usize) {
        let p = self.leaf_packed(x);
        ((p >> 32) as usize, (p & 0xffff_ffff) as usize)
    }

    /// The leaf `x` reaches, node index in the high 32 bits and class in the low: found by the
    /// branch-free scorer where this CPU and tree allow, else by walking.
    #[inline(always)]
    fn leaf_packed(&self, x: &[f32]) -> u64 {
        assert!(
            x.len() >= self.n_features,
            "row has {} features, the tree needs {}",
            x.len(),
            self.n_features
        );
        let sc = &self.scorer;
        if let (Some(kernel), Some(layout)) = (sc.kernel, sc.layout.as_deref()) {
            // SAFETY: `Scorer::new` chose the kernel for this CPU and layout, whose lanes are
            // within `n_features`, features among them; `x` holds `n_features` values (checked
            // above).
            return unsafe { (kernel.one)(x.as_ptr(), layout) };
        }
        let (i, c) = self.walk(x);
        (i as u64) << 32 | c as u64
    }

    /// The exit leaf by walking from the root (trees the scorer does not take, CPUs without
    /// AVX2, and the reference the scorer is tested against).
    #[inline]
    fn walk(&self, x: &[f32]) -> (usize, usize) {
        let mut i = 0usize;
        loop {
            // SAFETY: every constructor (`from_nodes`, `fit`) guarantees that child indices are
            // below `nodes.len()` and split features below `n_features`, and `x` was checked to
            // hold `n_features` values; the walk starts at the root, index 0 < len.
            match unsafe { *self.nodes.get_unchecked(i) } {
                Node::Split {
                    feature,
                    threshold,
                    left,
                    right,
                } => {
                    let v = unsafe { *x.get_unchecked(feature as usize) };
                    i = if v <= threshold { left } else { right } as usize;
                }
                Node::Leaf { class } => return (i, class as usize),
            }
        }
    }

    /// Class probabilities of one row into `proba` (leaf class fractions; one-hot for imported
    /// trees). Returns the row's class, the one [`Self::predict_class`] gives (the same leaf).
    pub fn predict_proba(&self, x: &[f32], proba: &mut [f32]) -> usize {
        let (i, c) = self.leaf(x);
        if self.proba.is_empty() {
            proba
                .iter_mut()
                .enumerate()
                .for_each(|(k, p)| *p = (k == c) as u8 as f32);
        } else {
            proba.copy_from_slice(&self.proba[i * self.n_classes..(i + 1) * self.n_classes]);
        }
        c
    }

    /// CART induction on `n` rows of `n_features` values with integer class labels in `y`.
    pub fn fit(x: &[f32], y: &[f32], n_features: usize, cfg: &TreeConfig) -> Result<Self> {
        if n_features == 0 || !x.len().is_multiple_of(n_features) {
            return Err(Error::Shape {
                what: "input values (not whole rows)",
                expected: n_features,
                found: x.len(),
            });
        }
        let n = x.len() / n_features;
        if y.len() != n {
            return Err(Error::Shape {
                what: "labels",
                expected: n,
                found: y.len(),
            });
        }
        if n == 0 {
            return Err(Error::invalid("data", "no rows"));
        }
        if x.iter().any(|v| !v.is_finite()) {
            return Err(Error::invalid("data", "contains NaN or infinity"));
        }
        let mut labels = Vec::with_capacity(n);
        for &v in y {
            if !math::is_class_index(v as f64, 65536) {
                return Err(Error::invalid(
                    "labels",
                    alloc::format!("label {v} is not a class index"),
                ));
            }
            labels.push(v as usize);
        }
        let n_classes = labels.iter().max().unwrap() + 1;
        let mut b = Builder {
            x,
            y: &labels,
            d: n_features,
            k: n_classes,
            cfg,
            nodes: Vec::new(),
            proba: Vec::new(),
        };
        let mut idx: Vec<usize> = (0..n).collect();
        b.grow(&mut idx, 0);
        let (nodes, proba) = (b.nodes, b.proba);
        Ok(DecisionTree {
            scorer: Scorer::new(&nodes, n_features),
            nodes,
            n_features,
            n_classes,
            proba,
        })
    }

    /// The tree as scikit-learn's `export_text` prints it (`decimals` digits, `feature_N` names,
    /// `class: C.0` leaves, as in KML's `readahead_model.dt`).
    pub fn export_text(&self, decimals: usize) -> String {
        let mut out = String::new();
        self.export_node(0, 0, decimals, &mut out);
        out
    }

    fn export_node(&self, i: usize, depth: usize, dec: usize, out: &mut String) {
        let indent = |out: &mut String| {
            for _ in 0..depth {
                out.push_str("|   ");
            }
            out.push_str("|--- ");
        };
        match self.nodes[i] {
            Node::Split {
                feature,
                threshold,
                left,
                right,
            } => {
                indent(out);
                let _ = writeln!(out, "feature_{feature} <= {threshold:.dec$}");
                self.export_node(left as usize, depth + 1, dec, out);
                indent(out);
                let _ = writeln!(out, "feature_{feature} >  {threshold:.dec$}");
                self.export_node(right as usize, depth + 1, dec, out);
            }
            Node::Leaf { class } => {
                indent(out);
                let _ = writeln!(out, "class: {class}.0");
            }
        }
    }

    /// Parse scikit-learn `export_text` output. Errors give the line number.
    /// `n_features` and `n_classes` may be 0 to infer them from the text.
    pub fn import_text(text: &str, n_features: usize, n_classes: usize) -> Result<Self> {
        let mut lines = Vec::new();
        for (no, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            lines.push(parse_line(no + 1, raw)?);
        }
        if lines.is_empty() {
            return Err(Error::parse(1, "empty tree"));
        }
        // Features and classes out of the model's range are named by their line here, before
        // the tree exists (its own check can only name a node index).
        for l in &lines {
            match l.kind {
                LineKind::Le(f, _) | LineKind::Gt(f, _) if n_features > 0 && f as usize >= n_features => {
                    return Err(Error::parse(
                        l.no,
                        alloc::format!(
                            "feature_{f}: the model has {n_features} features (feature_0 to feature_{})",
                            n_features - 1
                        ),
                    ));
                }
                LineKind::Class(c) if n_classes > 0 && c as usize >= n_classes => {
                    return Err(Error::parse(
                        l.no,
                        alloc::format!("class {c}: the model has {n_classes} classes (0 to {})", n_classes - 1),
                    ));
                }
                _ => {}
            }
        }
        let mut p = TextParser {
            lines: &lines,
            pos: 0,
            nodes: Vec::new(),
        };
        p.node(0)?;
        if p.pos != lines.len() {
            return Err(Error::parse(
                lines[p.pos].no,
                "unexpected line after the end of the tree",
            ));
        }
        let max_f = p
            .nodes
            .iter()
            .filter_map(|n| {
                if let Node::Split { feature, .. } = n {
                    Some(*feature as usize + 1)
                } else {
                    None
                }
            })
            .max()
            .unwrap_or(0);
        let max_c = p
            .nodes
            .iter()
            .filter_map(|n| {
                if let Node::Leaf { class } = n {
                    Some(*class as usize + 1)
                } else {
                    None
                }
            })
            .max()
            .unwrap_or(0);
        let nf = if n_features == 0 { max_f } else { n_features };
        let nc = if n_classes == 0 { max_c } else { n_classes };
        DecisionTree::from_nodes(p.nodes, nf.max(1), nc.max(1))
    }
}

struct Builder<'a> {
    x: &'a [f32],
    y: &'a [usize],
    d: usize,
    k: usize,
    cfg: &'a TreeConfig,
    nodes: Vec<Node>,
    proba: Vec<f32>,
}

impl Builder<'_> {
    fn impurity(&self, counts: &[usize], total: usize) -> f64 {
        if total == 0 {
            return 0.0;
        }
        let t = total as f64;
        match self.cfg.criterion {
            Criterion::Gini => 1.0 - counts.iter().map(|&c| (c as f64 / t) * (c as f64 / t)).sum::<f64>(),
            Criterion::Entropy => -counts
                .iter()
                .filter(|&&c| c > 0)
                .map(|&c| {
                    let p = c as f64 / t;
                    p * math::ln64(p)
                })
                .sum::<f64>(),
        }
    }

    /// Grow the subtree for the rows in `idx`; returns its node index.
    fn grow(&mut self, idx: &mut [usize], depth: usize) -> u32 {
        let me = self.nodes.len();
        let mut counts = alloc::vec![0usize; self.k];
        for &i in idx.iter() {
            counts[self.y[i]] += 1;
        }
        let majority = counts
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))
            .unwrap()
            .0;
        self.nodes.push(Node::Leaf { class: majority as u32 });
        self.proba.extend(counts.iter().map(|&c| c as f32 / idx.len() as f32));

        let n = idx.len();
        let parent = self.impurity(&counts, n);
        let depth_ok = depth < MAX_DEPTH && self.cfg.max_depth.is_none_or(|m| depth < m);
        if !depth_ok || n < self.cfg.min_samples_split.max(2) || parent <= 0.0 {
            return me as u32;
        }
        // Best split over every feature and every midpoint between distinct sorted values.
        let mut best: Option<(f64, usize, f32)> = None;
        let mut left = alloc::vec![0usize; self.k];
        for f in 0..self.d {
            idx.sort_by(|&a, &b| self.x[a * self.d + f].total_cmp(&self.x[b * self.d + f]));
            left.iter_mut().for_each(|c| *c = 0);
            let mut right = counts.clone();
            for s in 1..n {
                let c = self.y[idx[s - 1]];
                left[c] += 1;
                right[c] -= 1;
                let (a, b) = (self.x[idx[s - 1] * self.d + f], self.x[idx[s] * self.d + f]);
                if a == b || s < self.cfg.min_samples_leaf || n - s < self.cfg.min_samples_leaf {
                    continue;
                }
                let score =
                    (s as f64 * self.impurity(&left, s) + (n - s) as f64 * self.impurity(&right, n - s)) / n as f64;
                if best.is_none_or(|(bs, _, _)| score < bs - 1e-12) {
                    let mut t = a + (b - a) / 2.0;
                    if t >= b {
                        t = a; // midpoint rounded up onto b: split at a itself keeps `<=` right
                    }
                    best = Some((score, f, t));
                }
            }
        }
        let Some((score, f, t)) = best else {
            return me as u32;
        };
        if score >= parent - 1e-12 {
            return me as u32;
        }
        // Partition rows: `<= t` first.
        let mut lo = 0;
        for j in 0..n {
            if self.x[idx[j] * self.d + f] <= t {
                idx.swap(lo, j);
                lo += 1;
            }
        }
        let (l_idx, r_idx) = idx.split_at_mut(lo);
        let l = self.grow(l_idx, depth + 1);
        let r = self.grow(r_idx, depth + 1);
        self.nodes[me] = Node::Split {
            feature: f as u32,
            threshold: t,
            left: l,
            right: r,
        };
        me as u32
    }
}

#[derive(Debug)]
enum LineKind {
    Le(u32, f32),
    Gt(u32, f32),
    Class(u32),
}

#[derive(Debug)]
struct TextLine {
    no: usize,
    depth: usize,
    kind: LineKind,
}

fn parse_line(no: usize, raw: &str) -> Result<TextLine> {
    let mut rest = raw.trim_end();
    let mut depth = 0;
    while let Some(r) = rest.strip_prefix("|   ") {
        depth += 1;
        rest = r;
    }
    let body = rest
        .strip_prefix("|--- ")
        .ok_or_else(|| Error::parse(no, "expected \"|--- \" after the indentation"))?;
    let body = body.trim();
    if let Some(c) = body.rsplit("class:").next().filter(|_| body.contains("class:")) {
        let c = c.trim();
        let v: f64 = c
            .parse()
            .map_err(|_| Error::parse(no, alloc::format!("class {} is not a number", crate::error::quote(c))))?;
        if !math::is_class_index(v, 65536) {
            return Err(Error::parse(
                no,
                alloc::format!("class {} is not a class index", crate::error::quote(c)),
            ));
        }
        return Ok(TextLine {
            no,
            depth,
            kind: LineKind::Class(v as u32),
        });
    }
    if body.starts_with("truncated") {
        return Err(Error::parse(no, "truncated branch: export the tree without max_depth"));
    }
    let (name, op, value) = if let Some((a, b)) = body.split_once("<=") {
        (a, true, b)
    } else if let Some((a, b)) = body.split_once('>') {
        (a, false, b)
    } else {
        return Err(Error::parse(
            no,
            "expected \"feature_N <= T\", \"feature_N >  T\" or \"class: C\"",
        ));
    };
    let name = name.trim();
    let feature: u32 = name
        .strip_prefix("feature_")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| {
            Error::parse(
                no,
                alloc::format!(
                    "feature name {} is not of the form feature_N",
                    crate::error::quote(name)
                ),
            )
        })?;
    let value = value.trim();
    let t: f32 = value.parse().map_err(|_| {
        Error::parse(
            no,
            alloc::format!("threshold {} is not a number", crate::error::quote(value)),
        )
    })?;
    if !t.is_finite() {
        return Err(Error::parse(no, "threshold is not finite"));
    }
    Ok(TextLine {
        no,
        depth,
        kind: if op {
            LineKind::Le(feature, t)
        } else {
            LineKind::Gt(feature, t)
        },
    })
}

struct TextParser<'a> {
    lines: &'a [TextLine],
    pos: usize,
    nodes: Vec<Node>,
}

impl TextParser<'_> {
    fn node(&mut self, depth: usize) -> Result<u32> {
        let last_no = self.lines.last().map_or(1, |l| l.no);
        if depth > MAX_DEPTH {
            return Err(Error::parse(
                self.lines[self.pos.min(self.lines.len() - 1)].no,
                alloc::format!("tree deeper than {MAX_DEPTH} levels"),
            ));
        }
        let line = self
            .lines
            .get(self.pos)
            .ok_or_else(|| Error::parse(last_no, "tree ends in the middle of a branch"))?;
        if line.depth != depth {
            return Err(Error::parse(
                line.no,
                alloc::format!("expected a line at depth {depth}, found depth {}", line.depth),
            ));
        }
        let me = self.nodes.len();
        match line.kind {
            LineKind::Class(c) => {
                self.pos += 1;
                self.nodes.push(Node::Leaf { class: c });
            }
            LineKind::Le(f, t) => {
                self.pos += 1;
                self.nodes.push(Node::Leaf { class: 0 }); // placeholder until the children exist
                let left = self.node(depth + 1)?;
                let gt = self
                    .lines
                    .get(self.pos)
                    .ok_or_else(|| Error::parse(last_no, "missing the \">\" branch"))?;
                match gt.kind {
                    LineKind::Gt(f2, t2) if gt.depth == depth && f2 == f && t2 == t => {}
                    _ => {
                        return Err(Error::parse(
                            gt.no,
                            alloc::format!("expected \"feature_{f} >  {t}\" at depth {depth}"),
                        ))
                    }
                }
                self.pos += 1;
                let right = self.node(depth + 1)?;
                self.nodes[me] = Node::Split {
                    feature: f,
                    threshold: t,
                    left,
                    right,
                };
            }
            LineKind::Gt(..) => return Err(Error::parse(line.no, "a \">\" branch without its \"<=\" branch")),
        }
        Ok(me as u32)
    }
}

#[cfg(test)]
mod scorer_tests {
    use super::*;
    use crate::Rng;

    /// Rows that probe every edge of a split: values at, just around and far from each
    /// threshold, signed zeros, infinities and NaN.
    fn hostile_rows(tree: &DecisionTree, rng: &mut Rng, n: usize) -> Vec<Vec<f32>> {
        let thresholds: Vec<f32> = tree
            .nodes()
            .iter()
            .filter_map(|n| {
                if let Node::Split { threshold, .. } = n {
                    Some(*threshold)
                } else {
                    None
                }
            })
            .collect();
        (0..n)
            .map(|_| {
                (0..tree.n_features())
                    .map(|_| match rng.below(8) {
                        0 => f32::NAN,
                        1 => [f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0][rng.below(4)],
                        2..=4 if !thresholds.is_empty() => {
                            let t = thresholds[rng.below(thresholds.len())];
                            [t, t.next_up(), t.next_down()][rng.below(3)]
                        }
                        _ => rng.uniform(-3.0, 3.0),
                    })
                    .collect()
            })
            .collect()
    }

    /// The tree once per kernel this CPU runs (AVX-512 and AVX2 here), so each is tested;
    /// a fit tree gets every kernel the CPU has the instructions for.
    fn with_each_kernel(tree: &DecisionTree) -> Vec<DecisionTree> {
        let Some(layout) = tree.scorer.layout.as_deref() else {
            assert!(tree.scorer.kernel.is_none(), "a kernel for a tree with no layout");
            return alloc::vec![tree.clone()];
        };
        let kernels = crate::kernels::tree_kernels(layout);
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        {
            let names: Vec<&str> = kernels.iter().map(|k| k.0).collect();
            let avx2 = std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma");
            let avx512 = avx2
                && std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("bmi1")
                && std::arch::is_x86_feature_detected!("bmi2");
            assert_eq!(names.contains(&"avx2"), avx2, "{names:?}");
            assert_eq!(names.contains(&"avx512"), avx512, "{names:?}");
        }
        if kernels.is_empty() {
            return alloc::vec![tree.clone()];
        }
        kernels
            .into_iter()
            .map(|(_, k)| {
                let mut t = tree.clone();
                t.scorer.kernel = Some(k);
                t
            })
            .collect()
    }

    #[test]
    fn the_scorer_finds_the_leaf_the_walk_finds() {
        let mut rng = Rng::new(7);
        let mut checked = 0;
        for (n_features, n_classes, max_depth) in [(1, 2, 1), (5, 4, 9), (8, 3, 6), (3, 7, 5), (8, 2, 12), (2, 2, 0)] {
            for seed in 0..6u64 {
                let mut r = Rng::new(seed);
                let n = 400;
                let x: Vec<f32> = (0..n * n_features).map(|_| r.uniform(-2.0, 2.0)).collect();
                let y: Vec<f32> = (0..n)
                    .map(|i| ((x[i * n_features] * 3.0).abs() as usize % n_classes) as f32)
                    .collect();
                let cfg = TreeConfig {
                    max_depth: Some(max_depth),
                    ..TreeConfig::default()
                };
                let tree = DecisionTree::fit(&x, &y, n_features, &cfg).unwrap();
                let leaves = tree.nodes().iter().filter(|n| matches!(n, Node::Leaf { .. })).count();
                assert_eq!(
                    tree.scorer.layout.is_none(),
                    leaves > Scorer::MAX_LEAVES,
                    "{leaves} leaves"
                );
                for tree in with_each_kernel(&tree) {
                    let rows = hostile_rows(&tree, &mut rng, 300);
                    for row in &rows {
                        assert_eq!(tree.leaf(row), tree.walk(row), "{row:?}");
                        checked += 1;
                    }
                    // Many rows at once give the same classes (a wrong stride or a skipped row
                    // shows: `out` starts at u32::MAX).
                    let flat: Vec<f32> = rows.concat();
                    let mut out = alloc::vec![u32::MAX; rows.len()];
                    tree.predict_classes(&flat, &mut out).unwrap();
                    let walked: Vec<u32> = rows.iter().map(|r| tree.walk(r).1 as u32).collect();
                    assert_eq!(out, walked);
                    let mut long = alloc::vec![0u32; rows.len() + 1];
                    assert!(tree.predict_classes(&flat, &mut long).is_err());
                    assert!(tree.predict_classes(&flat[1..], &mut out).is_err());
                    assert!(tree.predict_classes(&[], &mut []).is_ok());
                }
            }
        }
        assert!(checked > 10_000);
    }

    /// A random tree of `leaves` leaves over `n_features` features: a leaf chosen at random
    /// is split until there are enough (so shapes range from combs to balanced trees).
    fn random_tree(rng: &mut Rng, leaves: usize, n_features: usize) -> DecisionTree {
        let mut nodes = alloc::vec![Node::Leaf { class: 0 }];
        let mut open = alloc::vec![0usize];
        while open.len() < leaves {
            let i = open.swap_remove(rng.below(open.len()));
            let n = nodes.len() as u32;
            nodes[i] = Node::Split {
                feature: rng.below(n_features) as u32,
                // Few distinct thresholds, so rows often sit exactly on one.
                threshold: (rng.below(9) as f32 - 4.0) * 0.5,
                left: n,
                right: n + 1,
            };
            nodes.push(Node::Leaf {
                class: rng.below(3) as u32,
            });
            nodes.push(Node::Leaf {
                class: rng.below(3) as u32,
            });
            open.extend([n as usize, n as usize + 1]);
        }
        DecisionTree::from_nodes(nodes, n_features, 3).unwrap()
    }

    #[test]
    fn every_leaf_count_the_scorer_takes_finds_the_walk_s_leaf() {
        // Each kernel copy on this CPU (one block or two, sixteen leaves or more, narrow or
        // wide) against the walk, at every leaf count from 1 to one past the limit.
        let mut rng = Rng::new(11);
        let mut shapes = alloc::collections::BTreeSet::new();
        for leaves in 1..=Scorer::MAX_LEAVES + 1 {
            // Every row length: the narrow AVX-512 kernel has a copy for each.
            for n_features in 1..=8 {
                let tree = random_tree(&mut rng, leaves, n_features);
                let t = tree.scorer.layout.as_deref();
                assert_eq!(t.is_none(), leaves > Scorer::MAX_LEAVES);
                shapes.insert(t.map_or((false, 0, 0), |t| {
                    (t.wide(), t.n_blocks.min(3), t.n_leaves.div_ceil(16).min(3))
                }));
                for tree in with_each_kernel(&tree) {
                    let rows = hostile_rows(&tree, &mut rng, 200);
                    for row in &rows {
                        assert_eq!(tree.leaf(row), tree.walk(row), "{leaves} leaves, {row:?}");
                    }
                    let mut out = alloc::vec![u32::MAX; rows.len()];
                    tree.predict_classes(&rows.concat(), &mut out).unwrap();
                    let walked: Vec<u32> = rows.iter().map(|r| tree.walk(r).1 as u32).collect();
                    assert_eq!(out, walked, "{leaves} leaves, many rows at once");
                }
            }
        }
        // The narrow shapes a tree can have (17 leaves is the only one-block tree with two
        // leaf tests), wide ones, and the unfit (no layout).
        for shape in [
            (false, 1, 1),
            (false, 1, 2),
            (false, 2, 2),
            (true, 2, 3),
            (true, 3, 3),
            (false, 0, 0),
        ] {
            assert!(shapes.contains(&shape), "no tree of shape {shape:?} in {shapes:?}");
        }
    }

    #[test]
    fn wide_and_unfit_trees() {
        // A comb of 40 leaves (two mask words), every split on feature 7: split k at 2k, its
        // left leaf at 2k+1, its right the next split.
        let mut fixed = Vec::new();
        for k in 0..39u32 {
            fixed.push(Node::Split {
                feature: 7,
                threshold: k as f32,
                left: 2 * k + 1,
                right: 2 * k + 2,
            });
            fixed.push(Node::Leaf { class: k % 3 });
        }
        fixed.push(Node::Leaf { class: 2 });
        let comb = DecisionTree::from_nodes(fixed, 8, 3).unwrap();
        assert!(comb.scorer.layout.as_ref().is_some_and(|l| l.wide()));
        let mut rng = Rng::new(3);
        for comb in with_each_kernel(&comb) {
            for _ in 0..2000 {
                let mut row = [0.0f32; 8];
                row[7] = [rng.uniform(-2.0, 42.0), rng.below(41) as f32, f32::NAN][rng.below(3)];
                assert_eq!(comb.leaf(&row), comb.walk(&row), "{row:?}");
            }
        }
        // Nine features: no scorer, the walk answers.
        let nine = DecisionTree::from_nodes(
            alloc::vec![
                Node::Split {
                    feature: 8,
                    threshold: 0.5,
                    left: 1,
                    right: 2
                },
                Node::Leaf { class: 0 },
                Node::Leaf { class: 1 },
            ],
            9,
            2,
        )
        .unwrap();
        assert!(nine.scorer.layout.is_none());
        let mut row = [0.0f32; 9];
        row[8] = 1.0;
        assert_eq!(nine.predict_class(&row), 1);
        let rows = [[0.0f32; 9], row, row].concat();
        let mut out = [9u32; 3];
        nine.predict_classes(&rows, &mut out).unwrap();
        assert_eq!(out, [0, 1, 1]);
        // No features: every row is empty and reaches the one leaf.
        let stump = DecisionTree::from_nodes(alloc::vec![Node::Leaf { class: 1 }], 0, 2).unwrap();
        let mut out = [9u32; 4];
        stump.predict_classes(&[], &mut out).unwrap();
        assert_eq!(out, [1; 4]);
    }
}
