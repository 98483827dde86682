//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// `../shared/reference` relative to the repository root.
pub fn reference() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let r = root.join("../shared/reference");
    assert!(
        r.is_dir(),
        "reference data not found at {}: tests need ../shared beside the repository",
        r.display()
    );
    r
}

pub fn kml_dir() -> PathBuf {
    reference().join("kml/readahead")
}

/// Rows of whitespace-separated numbers.
pub fn rows(path: &std::path::Path) -> Vec<Vec<f32>> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(|t| t.parse().unwrap()).collect())
        .collect()
}

/// KML's own C outputs: (label, nn class, tree class, logits).
pub fn kml_inference() -> Vec<(usize, usize, usize, [f32; 4])> {
    let text = std::fs::read_to_string(kml_dir().join("nn_arch_data/kml_inference.csv")).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let v: Vec<&str> = l.split(',').collect();
            let f = |i: usize| v[i].parse::<f32>().unwrap();
            (
                v[1].parse().unwrap(),
                v[2].parse().unwrap(),
                v[3].parse().unwrap(),
                [f(4), f(5), f(6), f(7)],
            )
        })
        .collect()
}
