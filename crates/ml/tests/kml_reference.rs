//! KML's released readahead network and tree, imported, reproduce KML's own outputs
//! (issue 2, must-show 2; `shared/reference/README.md`).

mod common;
use common::*;
use iolearn_ml::{kml, ModelKind};

#[test]
fn imported_network_matches_kml_code_on_every_row() {
    let file = kml::import_network(&kml_dir().join("nn_arch_data")).unwrap();
    let ModelKind::Mlp(net) = &file.kind else {
        panic!("not an mlp")
    };
    assert_eq!(net.dims(), &[5, 15, 15, 5, 5, 4]);
    let inputs = rows(&kml_dir().join("nn_arch_data/input.csv"));
    let labels = rows(&kml_dir().join("nn_arch_data/output.csv"));
    let reference = kml_inference();
    assert_eq!(inputs.len(), 422);
    assert_eq!(reference.len(), 422);
    let mut ws = net.workspace();
    let (mut same, mut agree_labels, mut max_logit_err) = (0, 0, 0.0f32);
    let mut proba = [0f32; 4];
    for ((x, y), r) in inputs.iter().zip(&labels).zip(&reference) {
        let class = net.predict_class(x, &mut ws);
        assert_eq!(
            net.predict_proba(x, &mut ws, &mut proba),
            class,
            "scored with probabilities"
        );
        let logits = net.forward(x, &mut ws);
        for (a, b) in logits.iter().zip(&r.3) {
            max_logit_err = max_logit_err.max((a - b).abs() / b.abs().max(1.0));
        }
        same += (class == r.1) as usize;
        agree_labels += (class == y[0] as usize) as usize;
    }
    assert_eq!(same, 422, "network class differs from KML's code");
    assert_eq!(agree_labels, 390, "agreement with output.csv labels");
    // KML computes exp with its own approximation, so logits agree to ~1e-4, not bit for bit.
    assert!(max_logit_err < 1e-3, "logits differ from KML's by {max_logit_err}");
}

#[test]
fn imported_tree_matches_kml_code_on_every_row() {
    let kml = kml_dir();
    let file = kml::import_tree(
        &kml.join("decision_tree_model/readahead_model.dt"),
        &kml.join("nn_arch_data"),
    )
    .unwrap();
    let ModelKind::Tree(tree) = &file.kind else {
        panic!("not a tree")
    };
    assert_eq!(tree.nodes().len(), 59, "KML reports 59 nodes");
    assert_eq!(tree.depth(), 9, "KML reports depth 9");
    let inputs = rows(&kml.join("nn_arch_data/input.csv"));
    let labels = rows(&kml.join("nn_arch_data/output.csv"));
    let (mut same, mut agree) = (0, 0);
    let mut proba = [0f32; 4];
    for ((x, y), r) in inputs.iter().zip(&labels).zip(kml_inference()) {
        let c = tree.predict_class(x);
        assert_eq!(tree.predict_proba(x, &mut proba), c, "scored with probabilities");
        same += (c == r.2) as usize;
        agree += (c == y[0] as usize) as usize;
    }
    assert_eq!(same, 422, "tree class differs from KML's code");
    assert_eq!(agree, 370, "KML's tree agrees with the labels on 370 rows");
}

#[test]
fn tree_text_round_trips_through_export() {
    let text = std::fs::read_to_string(kml_dir().join("decision_tree_model/readahead_model.dt")).unwrap();
    let tree = iolearn_ml::DecisionTree::import_text(&text, 5, 4).unwrap();
    assert_eq!(
        tree.export_text(6),
        text,
        "export_text must reproduce KML's file byte for byte"
    );
}

#[test]
fn import_errors_name_the_file() {
    let dir = tempdir();
    for f in [
        "linear0_w.csv",
        "linear0_bias.csv",
        "linear1_w.csv",
        "linear1_bias.csv",
        "linear2_w.csv",
        "linear2_bias.csv",
        "mean.csv",
        "stddev.csv",
    ] {
        std::fs::copy(kml_dir().join("nn_arch_data").join(f), dir.join(f)).unwrap();
    }
    // One weight too few.
    let w = std::fs::read_to_string(dir.join("linear1_w.csv")).unwrap();
    std::fs::write(dir.join("linear1_w.csv"), &w[..w.rfind(' ').unwrap()]).unwrap();
    let e = kml::import_network(&dir).unwrap_err().to_string();
    assert!(
        e.contains("linear1_w.csv") && e.contains("expected 75, found 74"),
        "{e}"
    );
    // A bad number.
    std::fs::write(dir.join("linear1_w.csv"), w.replacen("0000", "zz00", 1)).unwrap();
    let e = kml::import_network(&dir).unwrap_err().to_string();
    assert!(e.contains("linear1_w.csv") && e.contains("line 1"), "{e}");
    // A missing file.
    std::fs::remove_file(dir.join("mean.csv")).unwrap();
    let e = kml::import_network(&dir).unwrap_err().to_string();
    assert!(e.contains("mean.csv"), "{e}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bias_on_one_line_is_accepted() {
    let mut t = kml::NetworkTexts::default();
    let d = kml_dir().join("nn_arch_data");
    for i in 0..3 {
        t.weights[i] = std::fs::read_to_string(d.join(format!("linear{i}_w.csv"))).unwrap();
        t.biases[i] = std::fs::read_to_string(d.join(format!("linear{i}_bias.csv")))
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
    }
    t.mean = std::fs::read_to_string(d.join("mean.csv")).unwrap();
    t.stddev = std::fs::read_to_string(d.join("stddev.csv")).unwrap();
    let a = kml::import_network_texts(&t).unwrap();
    let b = kml::import_network(&d).unwrap();
    assert_eq!(a.kind, b.kind);
}

#[test]
fn tree_text_errors_carry_line_numbers() {
    let cases = [
        ("|--- feature_0 <= 1.0\n|   |--- class: 1.0\n", "line 2"),
        ("|--- feature_x <= 1.0\n", "line 1"),
        (
            "|--- feature_0 <= 1.0\n|   |--- class: 1.0\n|--- feature_1 >  1.0\n|   |--- class: 0.0\n",
            "line 3",
        ),
        ("|--- class: banana\n", "line 1"),
        ("", "line 1"),
        ("|--- class: 1.0\n|--- class: 0.0\n", "line 2"),
    ];
    for (text, want) in cases {
        let e = iolearn_ml::DecisionTree::import_text(text, 0, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{text:?}: {e}");
    }
    // A feature or class outside the model's declared shape is named by its line too.
    let tree = "|--- feature_0 <= 1.0\n|   |--- class: 1.0\n|--- feature_0 >  1.0\n|   |--- feature_7 <= 2.0\n|   |   |--- class: 0.0\n|   |--- feature_7 >  2.0\n|   |   |--- class: 9.0\n";
    let e = iolearn_ml::DecisionTree::import_text(tree, 5, 4)
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 4") && e.contains("feature_7"), "{e}");
    let e = iolearn_ml::DecisionTree::import_text(tree, 8, 4)
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 7") && e.contains("class 9"), "{e}");
    assert!(iolearn_ml::DecisionTree::import_text(tree, 8, 10).is_ok());
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("iolearn-test-{}-{}", std::process::id(), line!()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_normaliser_a_model_file_would_refuse_is_refused_at_import() {
    // Found by the kml_texts fuzzer: a mean of 4.4e35 imported, then the model it made did not
    // load again ("means must be within 1e30"). One rule now holds at both ends.
    let d = kml_dir().join("nn_arch_data");
    let read = |f: &str| std::fs::read_to_string(d.join(f)).unwrap();
    let mut t = kml::NetworkTexts::default();
    for i in 0..3 {
        t.weights[i] = read(&format!("linear{i}_w.csv"));
        t.biases[i] = read(&format!("linear{i}_bias.csv"));
    }
    t.stddev = read("stddev.csv");
    for (mean, std) in [("4.4e35 0 0 0 0", None), ("0 0 0 0 0", Some("1e-31 1 1 1 1"))] {
        t.mean = mean.into();
        if let Some(s) = std {
            t.stddev = s.into();
        }
        let e = kml::import_network_texts(&t).unwrap_err().1.to_string();
        assert!(e.contains("within 1e30"), "{e}");
    }
    // And a fitted normaliser takes a spread below 1e-30 as a constant feature.
    let z = iolearn_ml::ZScore::fit(&[1.0, 2.0, 1.0, 4.0], 2).unwrap();
    assert_eq!(z.std[0], 0.0);
}
