//! Any byte string given to the model loader gives a model or an error, never a panic; a
//! loaded model encodes back to the same bytes (round trip). Inputs are tried twice: as they
//! are (exercising magic/version/length/checksum checks) and resealed with a correct length
//! and CRC, so the field decoder behind the checksum is reached too.
#![no_main]

use iolearn_ml::format::reseal;
use iolearn_ml::ModelFile;
use libfuzzer_sys::fuzz_target;

fn check(bytes: &[u8]) {
    if let Ok(m) = ModelFile::from_bytes(bytes) {
        let again = m.to_bytes();
        assert_eq!(again, bytes, "round trip changed the bytes");
        let _ = m.to_json();
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    let mut sealed = data.to_vec();
    reseal(&mut sealed);
    check(&sealed);
});
