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
    assert!(net.to_json().contains("\"log1p\": [true, true, true, true, false]"));
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
