//! A lock-free single-producer single-consumer ring buffer that counts what it drops.
//!
//! KML's probes push raw samples into a circular buffer from the I/O path and one asynchronous
//! thread drains it (`shared/spec/kml.md` section 2). The producer must never block or
//! allocate, so a full ring drops the new sample and counts it: a too-small ring shows up as a
//! drop count, not as a stall.
//!
//! ```
//! let (mut tx, mut rx) = iolearn_ml::ring::ring::<u32>(4);
//! assert!(tx.push(1));
//! assert_eq!(rx.pop(), Some(1));
//! ```

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

struct Shared<T> {
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
    mask: usize,
    /// Next slot to write; only the producer stores it.
    head: AtomicUsize,
    /// Next slot to read; only the consumer stores it.
    tail: AtomicUsize,
    pushed: AtomicU64,
    dropped: AtomicU64,
    closed: AtomicBool,
}

// SAFETY: a slot is written only by the single producer while it is outside [tail, head) and
// read only by the single consumer while it is inside; the Release store of `head` (resp.
// `tail`) publishes the write (resp. frees the slot) before the other side's Acquire load sees
// it. `T: Send` is required because values cross threads.
unsafe impl<T: Send> Sync for Shared<T> {}
// SAFETY: see above; the buffer owns its values.
unsafe impl<T: Send> Send for Shared<T> {}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        let (mut t, h) = (*self.tail.get_mut(), *self.head.get_mut());
        while t != h {
            // SAFETY: slots in [tail, head) hold initialised values nobody else can reach now.
            unsafe { (*self.slots[t & self.mask].get()).assume_init_drop() };
            t = t.wrapping_add(1);
        }
    }
}

/// The writing end. Not `Clone`: there is exactly one producer.
pub struct Producer<T> {
    shared: Arc<Shared<T>>,
}

/// The reading end. Not `Clone`: there is exactly one consumer.
pub struct Consumer<T> {
    shared: Arc<Shared<T>>,
}

/// Counters of a ring, readable from either end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingStats {
    /// Samples accepted.
    pub pushed: u64,
    /// Samples dropped because the ring was full.
    pub dropped: u64,
    /// Usable capacity.
    pub capacity: usize,
}

/// A ring holding at least `capacity` items (rounded up to a power of two).
pub fn ring<T: Send>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    let cap = capacity.max(1).next_power_of_two();
    let slots = (0..cap).map(|_| UnsafeCell::new(MaybeUninit::uninit())).collect();
    let shared = Arc::new(Shared {
        slots,
        mask: cap - 1,
        head: AtomicUsize::new(0),
        tail: AtomicUsize::new(0),
        pushed: AtomicU64::new(0),
        dropped: AtomicU64::new(0),
        closed: AtomicBool::new(false),
    });
    (Producer { shared: shared.clone() }, Consumer { shared })
}

impl<T> Shared<T> {
    fn stats(&self) -> RingStats {
        RingStats {
            pushed: self.pushed.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            capacity: self.mask + 1,
        }
    }
}

impl<T: Send> Producer<T> {
    /// Append `value`; returns false (and counts a drop) when the ring is full. Never blocks
    /// or allocates.
    #[inline]
    pub fn push(&mut self, value: T) -> bool {
        let s = &*self.shared;
        let head = s.head.load(Ordering::Relaxed);
        let tail = s.tail.load(Ordering::Acquire);
        if head.wrapping_sub(tail) > s.mask {
            s.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        // SAFETY: the slot at `head` is outside [tail, head), so the consumer does not touch it
        // and no initialised value is overwritten.
        unsafe { (*s.slots[head & s.mask].get()).write(value) };
        s.head.store(head.wrapping_add(1), Ordering::Release);
        s.pushed.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Counters.
    pub fn stats(&self) -> RingStats {
        self.shared.stats()
    }
}

impl<T> Drop for Producer<T> {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
    }
}

impl<T: Send> Consumer<T> {
    /// Take the oldest item, if any.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        let s = &*self.shared;
        let tail = s.tail.load(Ordering::Relaxed);
        let head = s.head.load(Ordering::Acquire);
        if tail == head {
            return None;
        }
        // SAFETY: the slot at `tail` is inside [tail, head): the producer finished writing it
        // (Acquire on head) and will not touch it until `tail` moves past it.
        let v = unsafe { (*s.slots[tail & s.mask].get()).assume_init_read() };
        s.tail.store(tail.wrapping_add(1), Ordering::Release);
        Some(v)
    }

    /// Items waiting.
    pub fn len(&self) -> usize {
        let s = &*self.shared;
        s.head
            .load(Ordering::Acquire)
            .wrapping_sub(s.tail.load(Ordering::Relaxed))
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the producer is gone (nothing more will arrive once the ring is empty).
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// Counters.
    pub fn stats(&self) -> RingStats {
        self.shared.stats()
    }
}
