//! The block layer's scheduler events of a few devices, streamed to a callback: what a
//! predictor keeping the books of a multi-tenant I/O scheduler needs (MittCFQ's successor on
//! a stock kernel, `iolearn_policy::mittsched`). Each request of the watched devices is seen
//! entering the scheduler (`block:block_rq_insert`, in its submitter's context: the thread
//! and the I/O priority bfq and mq-deadline act on), going to the driver (`block_rq_issue`),
//! completing (`block_rq_complete`), or merged into another (`block_rq_merge`).

use crate::{DeviceId, ProbeError};

/// Devices watched at most.
pub const SCHED_DEVICES: usize = 8;

/// What happened to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedKind {
    /// It entered the scheduler.
    Insert,
    /// The scheduler gave it to the driver.
    Issue,
    /// It completed.
    Complete,
    /// It was absorbed into another request (it leaves without an issue or a completion).
    Merged,
}

/// One request event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedEvent {
    /// When (`CLOCK_MONOTONIC`), ns.
    pub ts_ns: u64,
    /// The request's identity while it lives (its kernel address; reused after completion).
    pub rq: u64,
    /// Index of its device in the list given to [`SchedWatch::start`].
    pub device: usize,
    /// What happened.
    pub kind: SchedKind,
    /// Offset on the device, bytes.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
    /// The submitting thread (at insert; 0 otherwise).
    pub tid: u32,
    /// I/O priority class (`IOPRIO_CLASS_*`: 0 none, 1 real time, 2 best effort, 3 idle).
    pub class: u8,
    /// Level within the class (0 highest to 7).
    pub level: u8,
    /// A write.
    pub write: bool,
}

impl SchedEvent {
    /// The request's identity from insert to completion: its address and its place. (The
    /// address alone is not enough: on loop devices under bfq, requests at other places were
    /// seen inserted at the address of one still waiting.)
    pub fn id(&self) -> u64 {
        self.rq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ self.offset
    }

    /// Decode one ring-buffer record (`struct sched_event` of `bpf/events.h`).
    pub fn decode(b: &[u8]) -> Option<SchedEvent> {
        if b.len() < 40 {
            return None;
        }
        let u64_at = |i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_ne_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let ioprio = u16::from_ne_bytes([b[32], b[33]]);
        let kind = match b[34] {
            0 => SchedKind::Insert,
            1 => SchedKind::Issue,
            2 => SchedKind::Complete,
            3 => SchedKind::Merged,
            _ => return None,
        };
        Some(SchedEvent {
            ts_ns: u64_at(0),
            rq: u64_at(8),
            offset: u64_at(16).saturating_mul(512),
            len: u32_at(24) as u64,
            tid: u32_at(28),
            // include/uapi/linux/ioprio.h: class in bits 13-15, level in 0-2.
            class: (ioprio >> 13) as u8,
            level: (ioprio & 7) as u8,
            kind,
            device: b[35] as usize,
            write: b[36] != 0,
        })
    }
}

/// A running watch; stops (and joins its thread) when dropped or [`SchedWatch::stop`]ped.
pub struct SchedWatch {
    #[cfg_attr(not(iolearn_bpf), allow(dead_code))]
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    #[cfg_attr(not(iolearn_bpf), allow(dead_code))]
    thread: Option<std::thread::JoinHandle<Result<u64, ProbeError>>>,
}

impl SchedWatch {
    /// Watch `devices` (at most [`SCHED_DEVICES`]); `on_event` is called for every event, in
    /// the order they happened, on a thread of the watch's own.
    #[cfg(iolearn_bpf)]
    pub fn start(
        devices: &[DeviceId],
        on_event: impl FnMut(&SchedEvent) + Send + 'static,
    ) -> Result<SchedWatch, ProbeError> {
        crate::sys::check_root_and_btf()?;
        if devices.is_empty() || devices.len() > SCHED_DEVICES {
            return Err(ProbeError::Device(format!(
                "{} devices to watch (1 to {SCHED_DEVICES})",
                devices.len()
            )));
        }
        let devs: Vec<u32> = devices.iter().map(|&d| crate::kernel_dev(d)).collect();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let halt = stop.clone();
        // The skeleton and the ring buffer are not `Send`: they live and die on this thread.
        let thread = std::thread::spawn(move || live::run(&devs, on_event, &halt, ready_tx));
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(SchedWatch {
                stop,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(ProbeError::Denied(
                    "the watch's thread ended before it was ready".into(),
                ))
            }
        }
    }

    /// Always [`ProbeError::NotBuilt`] (this build has no eBPF programs).
    #[cfg(not(iolearn_bpf))]
    pub fn start(_: &[DeviceId], _: impl FnMut(&SchedEvent) + Send + 'static) -> Result<SchedWatch, ProbeError> {
        Err(ProbeError::NotBuilt)
    }

    /// Stop, after delivering what is in the ring; returns the events the ring had no room
    /// for (the books drift by that many), or why the watch ended early (the events after that
    /// were not delivered).
    pub fn stop(mut self) -> Result<u64, ProbeError> {
        self.halt()
    }

    fn halt(&mut self) -> Result<u64, ProbeError> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        match self.thread.take().map(|t| t.join()) {
            None => Ok(0),
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(ProbeError::Map("the watch's thread panicked".into())),
        }
    }
}

impl Drop for SchedWatch {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

#[cfg(iolearn_bpf)]
mod live {
    use super::{SchedEvent, SCHED_DEVICES};
    use crate::ProbeError;
    use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
    use libbpf_rs::{MapHandle, OpenObject, RingBufferBuilder};
    use std::mem::MaybeUninit;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc::Sender;
    use std::time::Duration;

    #[allow(clippy::all, missing_docs, dead_code, non_camel_case_types)]
    mod skel {
        include!(concat!(env!("OUT_DIR"), "/sched.skel.rs"));
    }

    /// How often the ring is drained.
    const DRAIN_EVERY: Duration = Duration::from_millis(1);

    fn denied(what: &str) -> impl Fn(libbpf_rs::Error) -> ProbeError + '_ {
        move |e| ProbeError::Denied(format!("{what}: {e}"))
    }

    fn load<'o>(storage: &'o mut MaybeUninit<OpenObject>, devs: &[u32]) -> Result<skel::SchedSkel<'o>, ProbeError> {
        let open = skel::SchedSkelBuilder::default()
            .open(storage)
            .map_err(denied("opening the eBPF object"))?;
        for (slot, &d) in open
            .maps
            .rodata_data
            .watched
            .iter_mut()
            .zip(devs.iter().take(SCHED_DEVICES))
        {
            *slot = d;
        }
        let mut s = open.load().map_err(denied("loading the eBPF programs"))?;
        s.attach().map_err(denied("attaching to the block tracepoints"))?;
        Ok(s)
    }

    /// Load, attach, report readiness, then deliver events until `stop`; returns the lost
    /// count.
    pub(super) fn run(
        devs: &[u32],
        mut on_event: impl FnMut(&SchedEvent),
        stop: &AtomicBool,
        ready: Sender<Result<(), ProbeError>>,
    ) -> Result<u64, ProbeError> {
        let mut storage = MaybeUninit::<OpenObject>::uninit();
        let setup = load(&mut storage, devs);
        let skel = match setup {
            Ok(s) => s,
            Err(e) => {
                let _ = ready.send(Err(e));
                return Ok(0);
            }
        };
        let map = match MapHandle::try_from(&skel.maps.sched_events) {
            Ok(m) => m,
            Err(e) => {
                let _ = ready.send(Err(ProbeError::Map(e.to_string())));
                return Ok(0);
            }
        };
        let mut builder = RingBufferBuilder::new();
        let added = builder
            .add(&map, |data: &[u8]| {
                if let Some(e) = SchedEvent::decode(data) {
                    on_event(&e);
                }
                0
            })
            .map(|_| ());
        let ring = match added.and_then(|()| builder.build()) {
            Ok(r) => r,
            Err(e) => {
                let _ = ready.send(Err(ProbeError::Map(e.to_string())));
                return Ok(0);
            }
        };
        let _ = ready.send(Ok(()));
        let mut failed = None;
        while !stop.load(Ordering::Relaxed) {
            // The programs do not wake this thread per event (only when the ring fills up):
            // it drains every millisecond, so the books are at most about that stale.
            match ring.poll(DRAIN_EVERY).and_then(|()| ring.consume()) {
                Ok(()) => {}
                // A signal ended the wait: what arrived is taken at the next turn.
                Err(e) if e.kind() == libbpf_rs::ErrorKind::Interrupted => {}
                Err(e) => {
                    failed = Some(ProbeError::Map(format!("reading the scheduler events: {e}")));
                    break;
                }
            }
        }
        let _ = ring.consume();
        drop(ring);
        match failed {
            Some(e) => Err(e),
            None => Ok(skel.maps.bss_data.lost),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_decodes_into_the_requests_place_priority_and_kind() {
        let mut b = vec![0u8; 40];
        b[0..8].copy_from_slice(&123u64.to_ne_bytes());
        b[8..16].copy_from_slice(&0xffff_8880_0000_1000u64.to_ne_bytes());
        b[16..24].copy_from_slice(&2048u64.to_ne_bytes());
        b[24..28].copy_from_slice(&4096u32.to_ne_bytes());
        b[28..32].copy_from_slice(&77u32.to_ne_bytes());
        // best effort (2), level 4
        b[32..34].copy_from_slice(&((2u16 << 13) | 4).to_ne_bytes());
        b[34] = 1;
        b[35] = 2;
        b[36] = 1;
        assert!(SchedEvent::decode(&b[..30]).is_none(), "a short record is refused");
        let e = SchedEvent::decode(&b).expect("a whole record");
        assert_eq!(e.offset, 2048 * 512);
        assert_eq!((e.len, e.tid, e.class, e.level), (4096, 77, 2, 4));
        assert_eq!((e.kind, e.device, e.write), (SchedKind::Issue, 2, true));
        b[34] = 9;
        assert!(SchedEvent::decode(&b).is_none(), "an unknown kind is refused");
    }
}
