//! io_uring with a fixed set of aligned buffers: one per I/O in flight.

use crate::buf::AlignedBuf;
use crate::{Error, IDLE_SPIN, MAX_IO};
use io_uring::{opcode, types, IoUring};
use iolearn_policy::admission::DeviceQueue;
use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::time::{Duration, Instant};

struct Slot {
    buf: AlignedBuf,
    request: usize,
    replica: usize,
    io_id: u64,
}

/// A finished I/O.
pub(crate) struct Completion {
    pub request: usize,
    pub replica: usize,
    pub io_id: u64,
    /// Bytes, or a negative errno.
    pub result: i32,
}

pub(crate) struct Ring {
    ring: IoUring,
    slots: Vec<Slot>,
    free: Vec<usize>,
    next_io_id: u64,
}

impl Ring {
    pub fn new(depth: usize) -> Result<Ring, Error> {
        let ring = IoUring::new(depth.next_power_of_two() as u32)
            .map_err(|e| Error(format!("io_uring: {e} (kernel without io_uring, or io_uring disabled)")))?;
        let slots = (0..depth)
            .map(|_| Slot {
                buf: AlignedBuf::new(MAX_IO as usize),
                request: 0,
                replica: 0,
                io_id: 0,
            })
            .collect();
        Ok(Ring {
            ring,
            slots,
            free: (0..depth).rev().collect(),
            next_io_id: 0,
        })
    }

    /// Room for the next event: one I/O, or two for a clone.
    pub fn has_room(&self) -> bool {
        self.free.len() >= 2
    }

    fn inflight(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Start an I/O now (it enters the device queue `queue` at `now_ns`).
    #[allow(clippy::too_many_arguments)]
    pub fn submit(
        &mut self,
        file: &File,
        request: usize,
        replica: usize,
        offset: u64,
        len: u32,
        write: bool,
        queue: &mut DeviceQueue,
        now_ns: u64,
    ) -> Result<(), Error> {
        let k = self.free.pop().ok_or_else(|| Error("no free I/O slot".into()))?;
        let io_id = self.next_io_id;
        self.next_io_id += 1;
        let slot = &mut self.slots[k];
        slot.request = request;
        slot.replica = replica;
        slot.io_id = io_id;
        let fd = types::Fd(file.as_raw_fd());
        let entry = if write {
            opcode::Write::new(fd, slot.buf.as_mut_ptr(), len)
                .offset(offset)
                .build()
        } else {
            opcode::Read::new(fd, slot.buf.as_mut_ptr(), len).offset(offset).build()
        }
        .user_data(k as u64);
        // SAFETY: the buffer (MAX_IO >= len bytes) and the file outlive the I/O: the slot is
        // not reused before its completion is reaped, and `drain` runs before buffers drop.
        unsafe {
            self.ring
                .submission()
                .push(&entry)
                .map_err(|_| Error("io_uring submission queue full".into()))?;
        }
        self.ring.submit().map_err(|e| Error(format!("io_uring submit: {e}")))?;
        queue.start(io_id, now_ns, len);
        Ok(())
    }

    /// Reap completions; wait up to `wait_ns` for one (None: until one arrives) when none is
    /// ready. With nothing in flight, just wait (the next arrival is due then).
    pub fn complete(&mut self, wait_ns: Option<u64>) -> Result<Vec<Completion>, Error> {
        if self.inflight() == 0 {
            if let Some(w) = wait_ns {
                pause(w);
            }
            return Ok(Vec::new());
        }
        let mut out = self.reap();
        if out.is_empty() && wait_ns != Some(0) {
            let ts = types::Timespec::from(Duration::from_nanos(wait_ns.unwrap_or(10_000_000).max(1_000)));
            let args = types::SubmitArgs::new().timespec(&ts);
            match self.ring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
                    ) => {}
                Err(e) => return Err(Error(format!("io_uring wait: {e}"))),
            }
            out = self.reap();
        }
        Ok(out)
    }

    fn reap(&mut self) -> Vec<Completion> {
        let mut out = Vec::new();
        for cqe in self.ring.completion() {
            let k = cqe.user_data() as usize;
            let s = &self.slots[k];
            out.push(Completion {
                request: s.request,
                replica: s.replica,
                io_id: s.io_id,
                result: cqe.result(),
            });
            self.free.push(k);
        }
        out
    }

    /// Wait for everything in flight (copies that lost a race still use their buffers).
    pub fn drain(&mut self) -> Result<(), Error> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.inflight() > 0 {
            if Instant::now() > deadline {
                return Err(Error(format!("{} I/Os still in flight after 60 s", self.inflight())));
            }
            self.complete(Some(10_000_000))?;
        }
        Ok(())
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // Never free a buffer the kernel may still write into.
        let _ = self.drain();
    }
}

/// Wait `ns`: sleep for long waits, spin the last stretch (timer slack is ~50 us).
fn pause(ns: u64) {
    let until = Instant::now() + Duration::from_nanos(ns);
    if ns > 2 * IDLE_SPIN.as_nanos() as u64 {
        std::thread::sleep(Duration::from_nanos(ns) - IDLE_SPIN);
    }
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}
