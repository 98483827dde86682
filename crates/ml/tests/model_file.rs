//! The model file format: round trips, and clear errors on truncated, corrupted, wrong-version
//! and wrong-schema files (issue 2, must-show 5).

mod common;
use iolearn_ml::format::{reseal, VERSION};
use iolearn_ml::{kml, Error, ModelFile};

fn kml_files() -> (ModelFile, ModelFile) {
    let d = common::kml_dir();
    (
        kml::import_network(&d.join("nn_arch_data")).unwrap(),
        kml::import_tree(
            &d.join("decision_tree_model/readahead_model.dt"),
            &d.join("nn_arch_data"),
        )
        .unwrap(),
    )
}

#[test]
fn round_trip_is_exact() {
    let (net, tree) = kml_files();
    for f in [net, tree] {
        let b = f.to_bytes();
        assert_eq!(&b[..4], b"IOLM");
        assert_eq!(ModelFile::from_bytes(&b).unwrap(), f);
        assert_eq!(ModelFile::from_bytes(&b).unwrap().to_bytes(), b);
    }
}

#[test]
fn every_truncation_is_a_truncation_error() {
    let (net, tree) = kml_files();
    for f in [net, tree] {
        let b = f.to_bytes();
        for n in 0..b.len() {
            match ModelFile::from_bytes(&b[..n]) {
                Err(Error::Truncated { .. }) => {}
                other => panic!("truncated to {n} of {} bytes: {other:?}", b.len()),
            }
        }
    }
}

#[test]
fn every_flipped_byte_is_detected() {
    let (net, _) = kml_files();
    let b = net.to_bytes();
    for i in 0..b.len() {
        let mut c = b.clone();
        c[i] ^= 0x40;
        let e = ModelFile::from_bytes(&c).expect_err("corruption not detected");
        // Every error renders as a message.
        assert!(!e.to_string().is_empty());
    }
    let mut c = b.clone();
    c[40] ^= 1;
    let e = ModelFile::from_bytes(&c).unwrap_err();
    assert!(matches!(e, Error::ChecksumMismatch { .. }), "{e:?}");
    assert!(e.to_string().contains("corrupted"), "{e}");
}

#[test]
fn wrong_magic_version_and_trailing_bytes() {
    let (net, _) = kml_files();
    let b = net.to_bytes();
    let mut c = b.clone();
    c[0] = b'X';
    assert_eq!(ModelFile::from_bytes(&c).unwrap_err(), Error::BadMagic);
    let mut c = b.clone();
    c[4..6].copy_from_slice(&(VERSION + 1).to_le_bytes());
    reseal(&mut c);
    let e = ModelFile::from_bytes(&c).unwrap_err();
    assert_eq!(
        e,
        Error::UnsupportedVersion {
            found: VERSION + 1,
            supported: VERSION
        }
    );
    assert!(e.to_string().contains("unsupported model format version 2"), "{e}");
    let mut c = b.clone();
    c.push(0);
    assert!(matches!(
        ModelFile::from_bytes(&c),
        Err(Error::Invalid { field: "length", .. })
    ));
}

#[test]
fn wrong_schema_is_refused() {
    let (net, _) = kml_files();
    assert!(net.expect_schema(kml::READAHEAD_SCHEMA).is_ok());
    let e = net.expect_schema("linnos-v1").unwrap_err();
    assert!(
        e.to_string().contains("kml-readahead-v1") && e.to_string().contains("linnos-v1"),
        "{e}"
    );
}

#[test]
fn resealed_garbage_in_fields_is_an_error() {
    // Corrupt fields but fix the checksum, so the field decoder itself must catch them.
    let (net, tree) = kml_files();
    for f in [net, tree] {
        let b = f.to_bytes();
        for i in 12..b.len() - 4 {
            for x in [0xFFu8, 0x01, 0x80] {
                let mut c = b.clone();
                c[i] ^= x;
                reseal(&mut c);
                let _ = ModelFile::from_bytes(&c); // must not panic; may be Ok (e.g. a weight changed)
            }
        }
    }
}

#[test]
fn inconsistent_parts_are_refused() {
    let (mut net, _) = kml_files();
    net.features.pop();
    let e = ModelFile::from_bytes(&net.to_bytes()).unwrap_err();
    assert!(e.to_string().contains("feature names"), "{e}");
}

#[test]
fn json_dump_is_valid_and_complete() {
    let (net, tree) = kml_files();
    let j = net.to_json();
    for key in [
        "\"kind\": \"mlp\"",
        "\"schema\": \"kml-readahead-v1\"",
        "\"readseq\"",
        "\"read_ahead_kb\"",
        "\"type\": \"sigmoid\"",
    ] {
        assert!(j.contains(key), "{key} missing");
    }
    assert!(tree.to_json().contains("\"threshold\": -0.349458"));
}

#[test]
fn trained_tree_keeps_its_leaf_probabilities() {
    let (x, y) = iolearn_ml::datasets::kml_like(30, 2);
    let t = iolearn_ml::DecisionTree::fit(
        &x,
        &y,
        5,
        &iolearn_ml::TreeConfig {
            max_depth: Some(2),
            ..Default::default()
        },
    )
    .unwrap();
    let f = ModelFile::new(iolearn_ml::ModelKind::Tree(t.clone()), "t");
    let back = ModelFile::from_bytes(&f.to_bytes()).unwrap();
    assert_eq!(back, f);
    let iolearn_ml::ModelKind::Tree(t2) = back.kind else {
        panic!()
    };
    let (mut a, mut b) = ([0.0; 4], [0.0; 4]);
    t.predict_proba(&x[..5], &mut a);
    t2.predict_proba(&x[..5], &mut b);
    assert_eq!(a, b);
    assert_eq!(t.leaf_proba(), t2.leaf_proba());
    assert!(
        t2.leaf_proba().iter().any(|&p| p > 0.0 && p < 1.0),
        "a depth-2 tree has mixed leaves"
    );
}

#[test]
fn save_and_load_through_files_name_the_file_on_error() {
    let (net, _) = kml_files();
    let dir = std::env::temp_dir().join(format!("iolearn-save-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.iolm");
    let written = net.save(&path).unwrap();
    assert_eq!(written, std::fs::metadata(&path).unwrap().len() as usize);
    assert_eq!(ModelFile::load(&path).unwrap(), net);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file left");
    assert!(matches!(
        ModelFile::load(dir.join("missing.iolm")),
        Err(Error::Io { .. })
    ));
    std::fs::write(&path, b"IOLM-garbage").unwrap();
    let e = ModelFile::load(&path).unwrap_err();
    assert!(
        matches!(e, Error::InFile { .. }) && e.to_string().contains("m.iolm"),
        "{e}"
    );
    let e = net.save(dir.join("no/such/dir/m.iolm")).unwrap_err();
    assert!(
        matches!(e, Error::Io { .. }) && e.to_string().contains("no/such/dir"),
        "{e}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn log_normaliser_round_trips_and_bad_masks_are_refused() {
    let (mut net, _) = kml_files();
    let z = net.normaliser.clone().unwrap();
    net.normaliser = Some(z.clone().with_log1p(vec![true, true, true, true, false]).unwrap());
    let b = net.to_bytes();
    let back = ModelFile::from_bytes(&b).unwrap();
    assert_eq!(back, net);
    let j: serde_json::Value = serde_json::from_str(&net.to_json()).unwrap();
    assert_eq!(
        j["normaliser"]["log1p"],
        serde_json::json!([true, true, true, true, false])
    );
    // The transform: log first, then the Z-score.
    let zl = back.normaliser.as_ref().unwrap();
    let mut row = [100.0f32, 0.0, 0.0, 0.0, 0.5];
    zl.transform(&mut row);
    let want = ((101f64.ln() - zl.mean[0]) / zl.std[0]) as f32;
    assert!((row[0] - want).abs() < 1e-5, "{} vs {want}", row[0]);
    // The mask is the last 5 bytes of the normaliser: find it after the std values.
    let mask_at = b.windows(5).rposition(|w| w == [1, 1, 1, 1, 0]).unwrap();
    for (bad, what) in [(2u8, "expected 0 or 1"), (0, "no feature marked")] {
        let mut c = b.clone();
        if bad == 0 {
            c[mask_at..mask_at + 4].fill(0);
        } else {
            c[mask_at] = bad;
        }
        reseal(&mut c);
        let e = ModelFile::from_bytes(&c).unwrap_err().to_string();
        assert!(e.contains("log1p mask") && e.contains(what), "{e}");
    }
    // A mask of the wrong width cannot be built.
    assert!(z.with_log1p(vec![true]).is_err());
}

#[test]
fn a_model_whose_width_does_not_fit_its_schema_is_refused_on_save_and_on_load() {
    // Issue 11: a readahead model with 4 inputs was saved and then panicked the tuner at its
    // first decision.
    use iolearn_ml::{MlpBuilder, ModelKind};
    let mut m = ModelFile::new(
        ModelKind::Mlp(MlpBuilder::new(4).output(4).build()),
        kml::READAHEAD_SCHEMA,
    );
    let dir = std::env::temp_dir().join(format!("iolearn-schema-width-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.iolm");
    let e = m.save(&path).unwrap_err().to_string();
    assert!(e.contains("kml-readahead-v1 takes 5 inputs but the model has 4"), "{e}");
    assert!(!path.exists(), "nothing written");
    let e = ModelFile::from_bytes(&m.to_bytes()).unwrap_err().to_string();
    assert!(e.contains("takes 5 inputs"), "{e}");
    // A negative or absurd readahead in the class map is refused too.
    m.kind = ModelKind::Mlp(MlpBuilder::new(5).output(2).build());
    m.action_unit = "read_ahead_kb".into();
    m.classes = vec![
        iolearn_ml::ClassAction {
            label: "a".into(),
            action: -16,
        },
        iolearn_ml::ClassAction {
            label: "b".into(),
            action: 128,
        },
    ];
    let e = m.save(&path).unwrap_err().to_string();
    assert!(e.contains("class action") && e.contains("-16"), "{e}");
    m.classes[0].action = 16;
    m.save(&path).unwrap();
    assert_eq!(ModelFile::load(&path).unwrap(), m);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn loading_is_bounded() {
    let e = ModelFile::load("/dev/zero").unwrap_err().to_string();
    assert!(e.contains("/dev/zero") && e.contains("limit"), "{e}");
}

#[test]
fn widths_that_would_allocate_gigabytes_are_refused() {
    // Issue 11: a 57-byte file (an MLP of input width 2^32 - 1 and no linear layer) made
    // `model inspect` allocate 16 GiB; a tree could declare 2^32 - 1 classes.
    use iolearn_ml::{DecisionTree, Layer, ModelKind, Node, Sequential};
    let huge = ModelFile::new(
        ModelKind::Mlp(Sequential::new(u32::MAX as usize, vec![Layer::Sigmoid]).unwrap()),
        "custom",
    );
    let e = ModelFile::from_bytes(&huge.to_bytes()).unwrap_err().to_string();
    assert!(e.contains("input width") && e.contains("must be 1 to 65536"), "{e}");
    for (nf, nc, field) in [
        (1, u32::MAX as usize, "tree class count"),
        (u32::MAX as usize, 2, "tree feature count"),
    ] {
        let t = DecisionTree::from_nodes(vec![Node::Leaf { class: 0 }], nf, nc).unwrap();
        let e = ModelFile::from_bytes(&ModelFile::new(ModelKind::Tree(t), "custom").to_bytes())
            .unwrap_err()
            .to_string();
        assert!(e.contains(field), "{e}");
    }
    // A network with no layer at all.
    let empty = ModelFile::new(ModelKind::Mlp(Sequential::new(5, vec![]).unwrap()), "custom");
    let e = ModelFile::from_bytes(&empty.to_bytes()).unwrap_err().to_string();
    assert!(e.contains("at least one layer"), "{e}");
}

#[test]
fn a_diverged_model_is_refused_on_save() {
    // Issue 11: training that diverged to NaN saved a file every loader then rejected.
    let (mut net, _) = kml_files();
    if let iolearn_ml::ModelKind::Mlp(n) = &mut net.kind {
        if let iolearn_ml::Layer::Linear(l) = &mut n.layers_mut()[0] {
            l.bias[0] = f32::NAN;
        }
    }
    let path = std::env::temp_dir().join(format!("iolearn-diverged-{}.iolm", std::process::id()));
    let e = net.save(&path).unwrap_err().to_string();
    assert!(e.contains("NaN or infinite") && e.contains("diverged"), "{e}");
    assert!(!path.exists());
}
