//! The scikit-learn `export_text` parser never panics, and what it accepts exports back to
//! text that parses to the same tree.
#![no_main]

use iolearn_ml::DecisionTree;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(t) = DecisionTree::import_text(text, 0, 0) {
            let again = DecisionTree::import_text(&t.export_text(9), t.n_features(), t.n_classes()).expect("re-import");
            assert_eq!(again.nodes().len(), t.nodes().len());
        }
    }
});
