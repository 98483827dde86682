//! A rotating disk behind a host queue, for MittNOOP: seek cost growing with distance, half a
//! rotation on average, transfer at the media rate; the queue served first come first served
//! (`Fifo`, what MittNOOP predicts) or shortest seek first (`Sstf`, the disk's own reordering).

use iolearn_sim::device::{Device, DevicePreset};

/// Queue discipline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discipline {
    /// First come, first served.
    Fifo,
    /// Shortest seek (from the head's position) first among the waiting requests.
    Sstf,
}

/// One request: arrival, offset, length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskRequest {
    /// Arrival, ns.
    pub arrival_ns: u64,
    /// Offset, bytes.
    pub offset: u64,
    /// Length, bytes.
    pub len: u64,
}

/// Service time of one request with the head at `head`: seek + rotation (`Device::access_ns`)
/// + transfer.
pub fn service_ns(preset: &DevicePreset, head: u64, r: &DiskRequest) -> u64 {
    let mut d = Device::new(preset.clone());
    d.submit(0, head, 1, false); // place the head (a 1-byte read at `head`)
    let access = d.access_ns(r.offset, false);
    access + d.transfer_ns(r.len)
}

/// Completion times of `reqs` (sorted by arrival) on one disk with `discipline`.
pub fn simulate(preset: &DevicePreset, reqs: &[DiskRequest], discipline: Discipline) -> Vec<u64> {
    let mut done = vec![0u64; reqs.len()];
    let mut waiting: Vec<usize> = Vec::new();
    let (mut next, mut now, mut head) = (0usize, 0u64, 0u64);
    let mut served = 0;
    while served < reqs.len() {
        while next < reqs.len() && reqs[next].arrival_ns <= now {
            waiting.push(next);
            next += 1;
        }
        if waiting.is_empty() {
            now = reqs[next].arrival_ns;
            continue;
        }
        let pick = match discipline {
            Discipline::Fifo => 0,
            Discipline::Sstf => (0..waiting.len())
                .min_by_key(|&k| (reqs[waiting[k]].offset.abs_diff(head), waiting[k]))
                .unwrap(),
        };
        let i = waiting.remove(pick);
        now += service_ns(preset, head, &reqs[i]);
        head = reqs[i].offset + reqs[i].len;
        done[i] = now;
        served += 1;
    }
    done
}

/// MittNOOP's view of a FIFO disk queue: the time the disk is next free; a new request's wait
/// is `next_free - now`; on admission `next_free` grows by the predicted service time; on
/// completion it is corrected to the actual time (drift correction).
#[derive(Debug, Clone, Default)]
pub struct NextFree {
    /// When the disk is next free, ns.
    pub next_free_ns: u64,
    /// Where the head will be.
    pub head: u64,
}

impl NextFree {
    /// Predicted wait of a request arriving at `now_ns`.
    pub fn wait_ns(&self, now_ns: u64) -> u64 {
        self.next_free_ns.saturating_sub(now_ns)
    }

    /// Admit a request predicted to take `service_ns`: returns its predicted completion.
    pub fn admit(&mut self, now_ns: u64, offset: u64, len: u64, service_ns: u64) -> u64 {
        self.next_free_ns = self.next_free_ns.max(now_ns) + service_ns;
        self.head = offset + len;
        self.next_free_ns
    }

    /// A request completed at `actual_ns` when `predicted_ns` was expected: shift the queue.
    pub fn correct(&mut self, predicted_ns: u64, actual_ns: u64) {
        if actual_ns > predicted_ns {
            self.next_free_ns += actual_ns - predicted_ns;
        } else {
            self.next_free_ns = self.next_free_ns.saturating_sub(predicted_ns - actual_ns);
        }
    }
}
