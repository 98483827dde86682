//! Background contention on a replica: threads reading it hard during busy periods (MittOS's
//! noisy neighbours), so a policy has something real to dodge.

use crate::{AlignedBuf, Error, ALIGN};
use iolearn_ml::Rng;
use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Noise on replica 0.
#[derive(Debug, Clone, PartialEq)]
pub struct NoiseConfig {
    /// Reader threads while busy.
    pub threads: usize,
    /// Share of time busy.
    pub busy_fraction: f64,
    /// Mean busy period, ms (exponential on and off periods).
    pub busy_ms: f64,
    /// Size of each noise read, KiB.
    pub io_kib: u32,
    /// Seed of the on/off schedule and the offsets.
    pub seed: u64,
    /// Each thread's I/O priority (`ioprio_set`'s encoding); `None`: as inherited.
    pub ioprio: Option<u16>,
}

impl Default for NoiseConfig {
    fn default() -> Self {
        NoiseConfig {
            threads: 4,
            busy_fraction: 0.25,
            busy_ms: 50.0,
            io_kib: 256,
            seed: 1,
            ioprio: None,
        }
    }
}

/// Running noise; stops (and joins its threads) when dropped.
pub struct Noise {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// Threads that could not take their I/O priority (and did not run).
    wrong_prio: Arc<std::sync::atomic::AtomicUsize>,
}

impl Noise {
    /// Threads that could not take the I/O priority asked for and did not run: the noise was
    /// not what was asked.
    pub fn wrong_priority(&self) -> usize {
        self.wrong_prio.load(Ordering::Relaxed)
    }
}

impl Drop for Noise {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Every field in range; the error names it.
pub(crate) fn check(cfg: &NoiseConfig) -> Result<(), Error> {
    // Periods are drawn around busy_ms and busy_ms * (1 - f) / f: both stay within an hour
    // (a Duration of any length) with these bounds.
    if !(1..=64).contains(&cfg.threads) {
        return Err(Error(format!("noise threads: {} (1 to 64)", cfg.threads)));
    }
    if !(1e-6..=1.0).contains(&cfg.busy_fraction) {
        return Err(Error(format!(
            "noise busy fraction: {:?} (above 0, at most 1: always busy)",
            cfg.busy_fraction
        )));
    }
    if !(0.001..=60_000.0).contains(&cfg.busy_ms) {
        return Err(Error(format!(
            "noise busy period: {:?} ms (0.001 to 60000)",
            cfg.busy_ms
        )));
    }
    Ok(())
}

/// Start noise on `path` (`size` usable bytes).
pub(crate) fn start(cfg: &NoiseConfig, path: &Path, size: u64) -> Result<Noise, Error> {
    check(cfg)?;
    let stop = Arc::new(AtomicBool::new(false));
    let busy = Arc::new(AtomicBool::new(false));
    let wrong_prio = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut threads = Vec::new();
    // The schedule: exponential on and off periods.
    {
        let (stop, busy, cfg) = (stop.clone(), busy.clone(), cfg.clone());
        threads.push(std::thread::spawn(move || {
            let mut rng = Rng::new(cfg.seed);
            let off_ms = cfg.busy_ms * (1.0 - cfg.busy_fraction) / cfg.busy_fraction;
            let mut on = false;
            if cfg.busy_fraction >= 1.0 {
                busy.store(true, Ordering::Relaxed);
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            while !stop.load(Ordering::Relaxed) {
                let mean = if on { cfg.busy_ms } else { off_ms };
                // Capped at 10 means: a draw from the exponential's far tail is not a stall.
                let len = (-(1.0 - rng.next_f64()).ln() * mean).min(10.0 * mean);
                let until = Instant::now() + Duration::from_secs_f64(len / 1e3);
                busy.store(on, Ordering::Relaxed);
                while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                on = !on;
            }
            busy.store(false, Ordering::Relaxed);
        }));
    }
    let len = ((cfg.io_kib as u64) << 10).div_ceil(ALIGN) * ALIGN;
    for k in 0..cfg.threads {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .map_err(|e| Error(format!("noise: {}: {e}", path.display())))?;
        let (stop, busy) = (stop.clone(), busy.clone());
        let seed = cfg.seed.wrapping_add(k as u64 + 1);
        let ioprio = cfg.ioprio;
        let wrong = wrong_prio.clone();
        threads.push(std::thread::spawn(move || {
            if let Some(p) = ioprio {
                // A tenant that cannot take its priority does not run (it would not be the
                // tenant asked for); it is counted, and the caller fails the run.
                if set_ioprio(p).is_err() {
                    wrong.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
            let mut owned = AlignedBuf::new(len as usize);
            let buf = owned.slice(len as usize);
            let mut rng = Rng::new(seed);
            let blocks = (size - len) / ALIGN;
            while !stop.load(Ordering::Relaxed) {
                if busy.load(Ordering::Relaxed) {
                    let off = rng.below(blocks as usize + 1) as u64 * ALIGN;
                    let _ = file.read_at(buf, off);
                } else {
                    std::thread::sleep(Duration::from_micros(500));
                }
            }
        }));
    }
    Ok(Noise {
        stop,
        threads,
        wrong_prio,
    })
}

/// Set the calling thread's I/O priority (`IOPRIO_WHO_PROCESS` with 0: this thread; every
/// Linux thread has its own I/O context, so bfq gives it its own queue).
pub fn set_ioprio(ioprio: u16) -> std::io::Result<()> {
    // SAFETY: a plain system call with integer arguments.
    let r = unsafe { libc::syscall(libc::SYS_ioprio_set, 1, 0, ioprio as libc::c_long) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
