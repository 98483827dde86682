//! Linux's on-demand readahead, as a pure state machine.
//!
//! Modelled on `mm/readahead.c` and `mm/filemap.c` of Linux 6.x (the behaviour the golden tests
//! in `tests/readahead_golden.rs` check, each citing the function it follows):
//! - `struct file_ra_state` is [`RaState`]: `start`, `size`, `async_size` of the current window,
//!   `ra_pages` (the maximum, copied from the device's `read_ahead_kb` at open), `prev_index`
//!   and `mmap_miss`;
//! - `read()` misses go to [`RaState::sync_ra`] (`page_cache_sync_ra`), hits on the page that
//!   carries the readahead marker to [`RaState::async_ra`] (`page_cache_async_ra`);
//! - mmap faults go to [`RaState::mmap_sync`] (`do_sync_mmap_readahead`: read-around centred on
//!   the fault, or nothing after too many misses) and [`RaState::mmap_async`];
//! - `posix_fadvise` is [`Advice`]: RANDOM disables readahead, SEQUENTIAL doubles `ra_pages`.
//!
//! No backward readahead exists in Linux and none here. The functions return the window to read
//! ([`RaWindow`]); the caller reads the pages of it that are not cached and sets the marker on
//! page `start + size - async_size`.

/// What `posix_fadvise` / `madvise` said about a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Advice {
    /// `POSIX_FADV_NORMAL`.
    #[default]
    Normal,
    /// `POSIX_FADV_SEQUENTIAL`: twice the device's readahead.
    Sequential,
    /// `POSIX_FADV_RANDOM`: no readahead (`FMODE_RANDOM`, `VM_RAND_READ`).
    Random,
}

/// A readahead decision: read pages `start..start + size`, and mark page
/// `start + size - async_size` so that reaching it triggers the next, asynchronous, window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaWindow {
    /// First page.
    pub start: u64,
    /// Pages in the window.
    pub size: u64,
    /// Pages at the end of the window read ahead of need.
    pub async_size: u64,
}

impl RaWindow {
    /// The page that carries the readahead marker, if any.
    pub fn marker(&self) -> Option<u64> {
        (self.async_size > 0 && self.async_size <= self.size).then(|| self.start + self.size - self.async_size)
    }
}

/// `MMAP_LOTSAMISS` in `mm/filemap.c`: after this many net mmap misses, read-around stops.
pub const MMAP_LOTSAMISS: u32 = 100;

/// Per-open-file readahead state (`struct file_ra_state`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaState {
    /// Start of the current window.
    pub start: u64,
    /// Size of the current window.
    pub size: u64,
    /// Asynchronous part of the window.
    pub async_size: u64,
    /// Maximum readahead in pages (from the device at open, or set per file).
    pub ra_pages: u64,
    /// Page index of the previous read (`prev_pos >> PAGE_SHIFT`); `None` before any.
    pub prev_index: Option<u64>,
    /// Net count of mmap misses (incremented per fault miss, decremented per hit).
    pub mmap_miss: u32,
    /// fadvise state.
    pub advice: Advice,
}

/// `get_init_ra_size`: the first window for a request of `size` pages.
pub fn init_ra_size(size: u64, max: u64) -> u64 {
    let new = size.max(1).next_power_of_two();
    if new <= max / 32 {
        new * 4
    } else if new <= max / 4 {
        new * 2
    } else {
        max
    }
}

/// `get_next_ra_size`: ramp-up from the current window `cur`.
pub fn next_ra_size(cur: u64, max: u64) -> u64 {
    if cur < max / 16 {
        4 * cur
    } else if cur <= max / 2 {
        2 * cur
    } else {
        max
    }
}

impl RaState {
    /// State of a freshly opened file on a device with `ra_pages` of readahead.
    pub fn new(ra_pages: u64) -> Self {
        RaState {
            start: 0,
            size: 0,
            async_size: 0,
            ra_pages,
            prev_index: None,
            mmap_miss: 0,
            advice: Advice::Normal,
        }
    }

    /// Apply `posix_fadvise`. `device_ra_pages` is the device's current setting (NORMAL and
    /// SEQUENTIAL recompute from it, as `generic_fadvise` does from the bdi).
    pub fn fadvise(&mut self, advice: Advice, device_ra_pages: u64) {
        self.advice = advice;
        match advice {
            Advice::Normal => self.ra_pages = device_ra_pages,
            Advice::Sequential => self.ra_pages = 2 * device_ra_pages,
            Advice::Random => {}
        }
    }

    fn set(&mut self, start: u64, size: u64, async_size: u64) -> RaWindow {
        self.start = start;
        self.size = size;
        self.async_size = async_size;
        RaWindow {
            start,
            size,
            async_size,
        }
    }

    /// `page_cache_sync_ra`: a `read()` of `req` pages at `index` missed the cache.
    /// `cached(i)` says whether page `i` of the file is in the page cache (for the context
    /// readahead that looks for a sequential stream's history).
    pub fn sync_ra(&mut self, index: u64, req: u64, cached: impl Fn(u64) -> bool) -> RaWindow {
        let req = req.max(1);
        let prev = self.prev_index;
        self.prev_index = Some(index + req - 1);
        // FMODE_RANDOM or no readahead configured: read only what was asked
        // (`force_page_cache_ra` / a one-page read).
        if self.advice == Advice::Random || self.ra_pages == 0 {
            return RaWindow {
                start: index,
                size: req,
                async_size: 0,
            };
        }
        let max = self.ra_pages;
        // Start of file, oversized read, or sequential cache miss.
        let sequential = prev.is_some_and(|p| index.wrapping_sub(p) <= 1);
        if index == 0 || req > max || sequential {
            let size = init_ra_size(req, max);
            let async_size = if size > req { size - req } else { size };
            return self.set(index, size, async_size);
        }
        // Context readahead: count the cached pages just before `index`
        // (`page_cache_prev_miss`); a long enough run means a sequential stream.
        let mut contig = 0;
        while contig < max && index > contig && cached(index - 1 - contig) {
            contig += 1;
        }
        if contig >= req {
            // Treat as sequential: the stream has read `contig` pages already.
            let size = init_ra_size(contig + req, max);
            return self.set(index, size, size);
        }
        // Random read: just the requested pages (`do_page_cache_ra`).
        RaWindow {
            start: index,
            size: req,
            async_size: 0,
        }
    }

    /// `page_cache_async_ra`: a read reached the page with the readahead marker at `index`.
    /// `cached(i)` as for [`RaState::sync_ra`]. `None` when no readahead follows.
    pub fn async_ra(&mut self, index: u64, req: u64, cached: impl Fn(u64) -> bool) -> Option<RaWindow> {
        self.prev_index = Some(index + req.max(1) - 1);
        if self.advice == Advice::Random || self.ra_pages == 0 {
            return None;
        }
        let max = self.ra_pages;
        let expected = self.start + self.size - self.async_size;
        if index == expected {
            // The stream is where we expected: slide the window forward and ramp up.
            let size = next_ra_size(self.size, max);
            return Some(self.set(self.start + self.size, size, size));
        }
        // Interleaved or restarted streams: continue after the cached run that follows index.
        let mut next = index + 1;
        while next - index <= max && cached(next) {
            next += 1;
        }
        if next - index > max {
            return None;
        }
        let size = next_ra_size(next - index + req.max(1), max);
        Some(self.set(next, size, size))
    }

    /// `do_sync_mmap_readahead`: a page fault at `index` missed the cache. `None` means read
    /// only the faulting page.
    pub fn mmap_sync(&mut self, index: u64, cached: impl Fn(u64) -> bool) -> Option<RaWindow> {
        if self.advice == Advice::Random || self.ra_pages == 0 {
            return None;
        }
        if self.advice == Advice::Sequential {
            let n = self.ra_pages;
            return Some(self.sync_ra(index, n, cached));
        }
        if self.mmap_miss < MMAP_LOTSAMISS * 10 {
            self.mmap_miss += 1;
        }
        if self.mmap_miss > MMAP_LOTSAMISS {
            return None;
        }
        // Read-around: a window of ra_pages centred on the fault, a quarter of it async.
        let start = index.saturating_sub(self.ra_pages / 2);
        let (size, async_size) = (self.ra_pages, self.ra_pages / 4);
        Some(self.set(start, size, async_size))
    }

    /// `do_async_mmap_readahead`: a fault (or fault-around) found page `index` cached;
    /// `marker` says whether it carries the readahead marker.
    pub fn mmap_async(&mut self, index: u64, marker: bool, cached: impl Fn(u64) -> bool) -> Option<RaWindow> {
        if self.advice == Advice::Random {
            return None;
        }
        self.mmap_miss = self.mmap_miss.saturating_sub(1);
        if marker {
            let n = self.ra_pages;
            return self.async_ra(index, n, cached);
        }
        None
    }
}
