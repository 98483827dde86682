//! What a replica's device is to the rest of the flash world: something that serves block
//! requests in time order, can say when a read would complete (the perfect predictor's view)
//! and what a white box would show. The SSD, the disk and fixed-time servers implement it;
//! the replicas hold one each. (In `iolearn-sim` this lived in `replicas`, which imported the
//! SSD, which imported `replicas` back.)

use crate::ssd::{Command, Ssd};
use iolearn_sim::device::Device;

/// Something that serves block requests in time order.
pub trait Storage: Send {
    /// Submit at `now_ns`; returns the completion time.
    fn submit(&mut self, now_ns: u64, offset: u64, len: u64, write: bool) -> u64;
    /// When a read submitted at `now_ns` would complete, without serving it (the perfect
    /// predictor's view), where the storage can tell; `None` otherwise.
    fn peek(&mut self, _now_ns: u64, _offset: u64, _len: u64) -> Option<u64> {
        None
    }
    /// What the device would show a white-box predictor about a read of `len` bytes at
    /// `offset` at `now_ns` (MittSSD); zeros for black boxes.
    fn state(&mut self, _now_ns: u64, _offset: u64, _len: u64) -> DeviceState {
        DeviceState::default()
    }
    /// The planes a read of `len` bytes at `offset` would use, appended to `out`, where the
    /// device shares its page map (an open-channel SSD); nothing when it does not.
    fn planes_of(&self, _offset: u64, _len: u64, _out: &mut Vec<u32>) {}
    /// Keep the NAND commands issued from now on, where the device shows them (an open-channel
    /// SSD, whose host issues them).
    fn record_commands(&mut self) {}
    /// Move the commands issued since the last call to `out`.
    fn take_commands(&mut self, _out: &mut Vec<Command>) {}
    /// Let time pass to `now_ns` (work due by then starts), for a host about to read the
    /// commands issued so far.
    fn tick(&mut self, _now_ns: u64) {}
    /// Addressable bytes (where other tenants' I/Os land); 1 GiB when the storage does not say.
    fn capacity(&self) -> u64 {
        1 << 30
    }
}

/// A device's inside as seen by one request (white-box predictors: MittSSD, MittNOOP).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceState {
    /// Until the target plane (chip) is free; on a disk, until the disk is (MittNOOP's
    /// next-free time).
    pub plane_wait_ns: u64,
    /// Until the target channel's last booking ends.
    pub channel_wait_ns: u64,
    /// The target plane is collecting garbage.
    pub gc_active: bool,
    /// Pages in the write buffer.
    pub buffered_pages: u32,
}

impl Storage for Ssd {
    fn submit(&mut self, now_ns: u64, offset: u64, len: u64, write: bool) -> u64 {
        Ssd::submit(self, now_ns, offset, len, write)
    }
    fn state(&mut self, now_ns: u64, offset: u64, len: u64) -> DeviceState {
        Ssd::state(self, now_ns, offset, len)
    }
    fn peek(&mut self, now_ns: u64, offset: u64, len: u64) -> Option<u64> {
        Some(self.peek_read(now_ns, offset, len))
    }
    fn planes_of(&self, offset: u64, len: u64, out: &mut Vec<u32>) {
        Ssd::planes_of(self, offset, len, out)
    }
    fn record_commands(&mut self) {
        Ssd::record_commands(self)
    }
    fn take_commands(&mut self, out: &mut Vec<Command>) {
        Ssd::take_commands(self, out)
    }
    fn tick(&mut self, now_ns: u64) {
        Ssd::tick(self, now_ns)
    }
    fn capacity(&self) -> u64 {
        self.capacity_bytes()
    }
}

impl Storage for Device {
    fn submit(&mut self, now_ns: u64, offset: u64, len: u64, write: bool) -> u64 {
        Device::submit(self, now_ns, offset, len, write)
    }
    fn state(&mut self, now_ns: u64, _offset: u64, _len: u64) -> DeviceState {
        DeviceState {
            plane_wait_ns: self.next_free_ns().saturating_sub(now_ns),
            ..DeviceState::default()
        }
    }
    fn peek(&mut self, now_ns: u64, offset: u64, len: u64) -> Option<u64> {
        // Small state: serve a copy.
        Some(self.clone().submit(now_ns, offset, len, false))
    }
    fn capacity(&self) -> u64 {
        self.preset().capacity_bytes
    }
}

/// A server with a fixed service time and no queue (for worked examples and closed forms).
#[derive(Debug, Clone, Copy)]
pub struct Fixed(pub u64);

impl Storage for Fixed {
    fn submit(&mut self, now_ns: u64, _: u64, _: u64, _: bool) -> u64 {
        now_ns + self.0
    }
    fn peek(&mut self, now_ns: u64, _: u64, _: u64) -> Option<u64> {
        Some(now_ns + self.0)
    }
}
