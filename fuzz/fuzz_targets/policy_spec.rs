//! Policy strings on arbitrary text: admission policies (`ADMISSION[+CLIENT][+rank][+cache]`)
//! and readahead controllers (`vanilla`, `leap`, `static:KB`, `files:KB,...`, a model path).
//! A parse or an error of bounded length, never a panic; parsed readahead values are in range.
#![no_main]
use iolearn_policy::controller::ControllerSpec;
use iolearn_tail::PolicySpec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Err(e) = PolicySpec::parse(text) {
        assert!(e.len() < 1000, "an error of {} bytes", e.len());
    }
    match ControllerSpec::parse(text) {
        Ok(ControllerSpec::Static(kb)) => assert!(kb <= iolearn_ml::format::MAX_READ_AHEAD_KB as u64),
        Ok(ControllerSpec::Files(kbs)) => {
            assert!(kbs.iter().all(|&kb| kb <= iolearn_ml::format::MAX_READ_AHEAD_KB as u64))
        }
        Ok(_) => {}
        Err(e) => assert!(e.len() < 1000, "an error of {} bytes", e.len()),
    }
});
