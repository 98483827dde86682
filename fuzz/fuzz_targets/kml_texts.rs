//! KML's released `nn_arch_data` CSV files on arbitrary text: an import error naming the part
//! or a model that passes its own checks and round-trips through the model file format.
#![no_main]
use iolearn_ml::kml::{import_network_texts, parse_numbers, NetworkTexts};
use iolearn_ml::ModelFile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = parse_numbers(text);
    // Eight parts separated by '|': three weights, three biases, mean, stddev.
    let parts: Vec<&str> = text.split('|').collect();
    let part = |i: usize| parts.get(i).copied().unwrap_or("").to_string();
    let t = NetworkTexts {
        weights: [part(0), part(1), part(2)],
        biases: [part(3), part(4), part(5)],
        mean: part(6),
        stddev: part(7),
    };
    if let Ok(m) = import_network_texts(&t) {
        let back = ModelFile::from_bytes(&m.to_bytes()).expect("an imported model reloads");
        assert_eq!(back, m);
    }
});
