//! What the guardrail logs. A test binary of its own: `tracing` caches per call site whether
//! anyone listens, so another test's thread reaching a call site first with no subscriber
//! could silence it for a subscriber set on one thread; here the subscriber is the process's.

use iolearn_policy::controller::{ReadaheadController, ReadaheadKnobs, Static};
use iolearn_policy::guard::{GuardConfig, Guarded};
use iolearn_policy::readahead::{Outcome, WindowFeatures};
use iolearn_policy::steady::Steady;
use std::sync::{Arc, Mutex};

/// A device whose value is all there is to it.
struct Device(u64);

impl ReadaheadKnobs for Device {
    fn device_read_ahead_kb(&self) -> u64 {
        self.0
    }
    fn set_device_read_ahead_kb(&mut self, kb: u64) {
        self.0 = kb;
    }
    fn file_read_ahead_kb(&self, _: u64) -> u64 {
        self.0
    }
    fn set_file_read_ahead_kb(&mut self, _: u64, _: u64) {}
}

/// What the subscriber wrote.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_check_of_vanilla_is_logged_with_its_reason() {
    // 16 KiB as good as vanilla for a block (kept), then 20% worse from window 10 on: the
    // guardrail measures vanilla again, and its windows at vanilla, a change nobody else
    // asked for, are logged with the reason.
    let log = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer({
            let log = log.clone();
            move || log.clone()
        })
        .with_ansi(false)
        .finish();
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let mut g = Guarded::new(
        Box::new(Static::new(16)),
        Steady::new(1, 0),
        Some(GuardConfig::default()),
        128,
    );
    let mut dev = Device(128);
    for i in 0..30 {
        let pages = if dev.0 == 16 && i >= 10 { 24_000.0 } else { 30_000.0 };
        let w = WindowFeatures {
            outcome: Outcome {
                seconds: 1.0,
                ops: Some(pages),
                resolution: 1.0,
                pages_accessed: 5_000,
                pages_added: 10,
                read_ahead_kb: Some(dev.0),
                ..Outcome::default()
            },
            ..WindowFeatures::default()
        };
        g.decide(&w, &mut dev);
    }
    let logged = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert!(
        logged.contains("guard_check")
            && logged.contains("kept, then a block clearly below the vanilla it was judged against"),
        "{logged}"
    );
}
