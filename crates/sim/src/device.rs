//! Block devices: a queue served by parallel channels, with per-request latency, bandwidth,
//! splitting of large requests, and (for disks) seek and rotation.

/// The kind of device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    /// Flash: latency does not depend on position.
    Ssd,
    /// Rotating disk: seek time grows with the distance from the head.
    Hdd,
}

/// Device parameters. Presets say where their numbers come from.
#[derive(Debug, Clone, PartialEq)]
pub struct DevicePreset {
    /// Name.
    pub name: &'static str,
    /// Kind.
    pub kind: DeviceKind,
    /// Requests served at once (internal parallelism; the rest queue).
    pub channels: usize,
    /// Fixed cost of a read (command + flash read, or controller overhead for a disk).
    pub read_latency_ns: u64,
    /// Fixed cost of a write.
    pub write_latency_ns: u64,
    /// Transfer rate of the whole device, bytes per second: transfers of all channels share
    /// it, so a lone large request gets all of it and concurrent ones split it.
    pub bandwidth_bytes_per_s: u64,
    /// Largest request; bigger ones are split (`max_sectors_kb`).
    pub max_request_bytes: u64,
    /// Disks: full-stroke seek time (an average seek is about a third of it).
    pub full_seek_ns: u64,
    /// Disks: one revolution.
    pub rotation_ns: u64,
    /// Device capacity (disks: the seek distance scale).
    pub capacity_bytes: u64,
}

impl DevicePreset {
    /// An NVMe SSD in the class of KML's Samsung MZ1LV960 (PM953): ~90 us 4 KiB random read at
    /// queue depth 1, ~2 GB/s sequential read, 8 parallel channels (vendor data sheet class
    /// figures; KML section 6 testbed).
    pub fn nvme() -> Self {
        DevicePreset {
            name: "nvme",
            kind: DeviceKind::Ssd,
            channels: 8,
            read_latency_ns: 90_000,
            write_latency_ns: 30_000,
            bandwidth_bytes_per_s: 2_000_000_000,
            max_request_bytes: 512 * 1024,
            full_seek_ns: 0,
            rotation_ns: 0,
            capacity_bytes: 960 << 30,
        }
    }

    /// A SATA SSD in the class of KML's Intel SSDSC2BA200G3 (DC S3700): ~100 us 4 KiB random
    /// read at queue depth 1, ~500 MB/s (the SATA 3 limit), 4 channels.
    pub fn sata_ssd() -> Self {
        DevicePreset {
            name: "sata",
            kind: DeviceKind::Ssd,
            channels: 4,
            read_latency_ns: 100_000,
            write_latency_ns: 60_000,
            bandwidth_bytes_per_s: 500_000_000,
            max_request_bytes: 512 * 1024,
            full_seek_ns: 0,
            rotation_ns: 0,
            capacity_bytes: 200 << 30,
        }
    }

    /// A 7200 rpm disk: 8.3 ms per revolution, ~15 ms full stroke, 150 MB/s, one head.
    pub fn hdd() -> Self {
        DevicePreset {
            name: "hdd",
            kind: DeviceKind::Hdd,
            channels: 1,
            read_latency_ns: 100_000,
            write_latency_ns: 100_000,
            bandwidth_bytes_per_s: 150_000_000,
            max_request_bytes: 1024 * 1024,
            full_seek_ns: 15_000_000,
            rotation_ns: 8_333_333,
            capacity_bytes: 1 << 40,
        }
    }

    /// This project's machine: a file-backed loop device (`losetup --direct-io=on`) on the
    /// VM's virtio disk, calibrated on `shared/reference/calibration`: ~100 us per 4 KiB read
    /// (readrandom at 4 KiB readahead: ~6,500 ops/s at ~1.5 reads per op, single thread) and
    /// ~1.05 GB/s (readrandom at 4 MiB readahead moves 31.7 GB in 30 s).
    pub fn vm_loop() -> Self {
        DevicePreset {
            name: "loop",
            kind: DeviceKind::Ssd,
            channels: 4,
            read_latency_ns: 100_000,
            write_latency_ns: 60_000,
            bandwidth_bytes_per_s: 1_050_000_000,
            max_request_bytes: 512 * 1024,
            full_seek_ns: 0,
            rotation_ns: 0,
            capacity_bytes: 16 << 30,
        }
    }

    /// Look a preset up by name (`nvme`, `sata`, `hdd`, `loop`).
    pub fn by_name(name: &str) -> Option<Self> {
        match name {
            "loop" => Some(Self::vm_loop()),
            "nvme" => Some(Self::nvme()),
            "sata" => Some(Self::sata_ssd()),
            "hdd" => Some(Self::hdd()),
            _ => None,
        }
    }
}

/// Counters of a device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceStats {
    /// Read requests (after splitting).
    pub reads: u64,
    /// Write requests.
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
}

/// A device instance: its channels' next free times and, for a disk, the head position.
#[derive(Debug, Clone)]
pub struct Device {
    preset: DevicePreset,
    free_at_ns: Vec<u64>,
    bus_free_at_ns: u64,
    /// Transfers not yet finished, as (start, end) of their data movement.
    in_flight: Vec<(u64, u64)>,
    head_bytes: u64,
    stats: DeviceStats,
}

impl Device {
    /// An idle device.
    pub fn new(preset: DevicePreset) -> Self {
        let n = preset.channels.max(1);
        Device {
            preset,
            free_at_ns: vec![0; n],
            bus_free_at_ns: 0,
            in_flight: Vec::new(),
            head_bytes: 0,
            stats: DeviceStats::default(),
        }
    }

    /// The preset.
    pub fn preset(&self) -> &DevicePreset {
        &self.preset
    }

    /// Transfers not finished at `now_ns`, and how far the link is booked beyond it.
    pub fn backlog(&self, now_ns: u64) -> (usize, u64) {
        let n = self.in_flight.iter().filter(|t| t.1 > now_ns).count();
        (n, self.bus_free_at_ns.saturating_sub(now_ns))
    }

    /// When the first channel (a disk: the arm) is free again: MittNOOP's next-free time.
    pub fn next_free_ns(&self) -> u64 {
        self.free_at_ns.iter().copied().min().unwrap_or(0)
    }

    /// Counters.
    pub fn stats(&self) -> DeviceStats {
        self.stats
    }

    /// Access time of one request before its data moves: the fixed latency, plus seek and
    /// rotation on a disk.
    pub fn access_ns(&self, offset_bytes: u64, write: bool) -> u64 {
        let p = &self.preset;
        let fixed = if write { p.write_latency_ns } else { p.read_latency_ns };
        let position = match p.kind {
            DeviceKind::Ssd => 0,
            DeviceKind::Hdd => {
                let dist = offset_bytes.abs_diff(self.head_bytes);
                if dist <= 1 << 20 {
                    0 // track-to-track: the head is (nearly) there
                } else {
                    // Seek grows with the square root of the distance; half a turn on average.
                    let frac = (dist as f64 / p.capacity_bytes as f64).min(1.0);
                    (p.full_seek_ns as f64 * frac.sqrt()) as u64 + p.rotation_ns / 2
                }
            }
        };
        fixed + position
    }

    /// Time to move `len_bytes` at the device's full bandwidth.
    pub fn transfer_ns(&self, len_bytes: u64) -> u64 {
        (len_bytes as u128 * 1_000_000_000 / self.preset.bandwidth_bytes_per_s.max(1) as u128) as u64
    }

    /// Submit a request at `now_ns`; returns when it completes. Requests larger than
    /// `max_request_bytes` are split and their parts served in parallel where channels allow.
    ///
    /// The link's bandwidth is booked first come first served (`bus_free_at_ns`: a lone
    /// request's parts finish one after another at the full rate), but PCIe and SATA interleave
    /// small packets, so no request waits longer than it would under fair sharing with the
    /// transfers already in flight: its own transfer time plus, for each of them, the smaller
    /// of its remaining time and ours. Without that bound a 4 KiB read waited behind every
    /// queued 512 KiB readahead of a concurrent scan, and a random reader next to a scan fell
    /// to 1% of its throughput, which real devices do not do. Completions already promised are
    /// not moved back: an error of at most the new request's own transfer time.
    pub fn submit(&mut self, now_ns: u64, offset_bytes: u64, len_bytes: u64, write: bool) -> u64 {
        let max = self.preset.max_request_bytes.max(4096);
        let start = now_ns + self.access_ns(offset_bytes, write);
        let own = self.transfer_ns(len_bytes.max(1));
        self.in_flight.retain(|&(_, end)| end > now_ns);
        let shared: u64 = self
            .in_flight
            .iter()
            .filter(|&&(_, end)| end > start)
            .map(|&(from, end)| (end - from.max(start)).min(own))
            .sum();
        let fair_end = start + own + shared;
        let mut done = now_ns;
        let mut off = offset_bytes;
        let mut left = len_bytes.max(1);
        while left > 0 {
            let part = left.min(max);
            // FIFO onto the channel that frees first; the channel is busy for the access
            // time, then the data moves.
            let access = self.access_ns(off, write);
            let transfer = self.transfer_ns(part);
            let (ch, &free) = self.free_at_ns.iter().enumerate().min_by_key(|(_, &t)| t).unwrap();
            let ready = free.max(now_ns) + access;
            let booked = self.bus_free_at_ns.max(ready) + transfer;
            self.bus_free_at_ns = booked;
            let end = booked.min(fair_end.max(ready + transfer));
            self.free_at_ns[ch] = end;
            self.in_flight.push((end - transfer, end));
            done = done.max(end);
            self.head_bytes = off + part;
            if write {
                self.stats.writes += 1;
                self.stats.write_bytes += part;
            } else {
                self.stats.reads += 1;
                self.stats.read_bytes += part;
            }
            off += part;
            left -= part;
        }
        done
    }
}
