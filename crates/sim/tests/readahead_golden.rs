//! Golden tests: the readahead state machine against Linux's documented behaviour. Each test
//! names the kernel function (Linux 6.x, mm/readahead.c or mm/filemap.c) whose rule it checks.

use iolearn_sim::readahead::{init_ra_size, next_ra_size, Advice, RaState, RaWindow, MMAP_LOTSAMISS};
use std::collections::HashSet;

fn w(start: u64, size: u64, async_size: u64) -> RaWindow {
    RaWindow {
        start,
        size,
        async_size,
    }
}

#[test]
fn get_init_ra_size_table() {
    // get_init_ra_size: round up to a power of two, then x4 if <= max/32, x2 if <= max/4,
    // else max. max = 32 pages (128 KiB).
    let cases = [(1, 4), (2, 4), (3, 8), (4, 8), (8, 16), (9, 32), (16, 32), (17, 32)];
    for (req, want) in cases {
        assert_eq!(init_ra_size(req, 32), want, "req {req}");
    }
    assert_eq!(init_ra_size(1, 640), 4);
    assert_eq!(init_ra_size(100, 640), 256);
}

#[test]
fn get_next_ra_size_ramps_up_4x_then_2x_then_caps() {
    // get_next_ra_size: x4 below max/16, x2 up to max/2, then max.
    assert_eq!(next_ra_size(1, 32), 4);
    assert_eq!(next_ra_size(4, 32), 8);
    assert_eq!(next_ra_size(8, 32), 16);
    assert_eq!(next_ra_size(16, 32), 32);
    assert_eq!(next_ra_size(32, 32), 32);
    assert_eq!(next_ra_size(4, 256), 16);
}

/// Play a sequential stream of one-page read()s through the state machine, with a page cache
/// that holds whatever was read: returns every window issued.
fn sequential_stream(ra_pages: u64, pages: u64) -> Vec<RaWindow> {
    let mut ra = RaState::new(ra_pages);
    let mut cached: HashSet<u64> = HashSet::new();
    let mut marker: Option<u64> = None;
    let mut windows = Vec::new();
    for i in 0..pages {
        let got = if cached.contains(&i) {
            if marker == Some(i) {
                ra.async_ra(i, 1, |p| cached.contains(&p))
            } else {
                None
            }
        } else {
            Some(ra.sync_ra(i, 1, |p| cached.contains(&p)))
        };
        if let Some(win) = got {
            cached.extend(win.start..win.start + win.size);
            marker = win.marker();
            windows.push(win);
        }
    }
    windows
}

#[test]
fn sequential_read_starts_small_and_ramps_to_the_maximum_asynchronously() {
    // page_cache_sync_ra at index 0: initial window get_init_ra_size(1, 32) = 4, async part
    // size - req = 3, marker on page 1. Each marker hit (page_cache_async_ra, index ==
    // start + size - async_size) slides the window by its size and ramps it up, all async.
    let got = sequential_stream(32, 200);
    let want = [
        w(0, 4, 3),
        w(4, 8, 8),
        w(12, 16, 16),
        w(28, 32, 32),
        w(60, 32, 32),
        w(92, 32, 32),
        w(124, 32, 32),
        w(156, 32, 32),
        w(188, 32, 32),
        w(220, 32, 32),
    ];
    assert_eq!(got, want);
}

#[test]
fn random_reads_get_no_readahead() {
    // page_cache_sync_ra: not at the start, not sequential, no cached history ->
    // do_page_cache_ra of just the requested pages.
    let mut ra = RaState::new(32);
    assert_eq!(ra.sync_ra(5000, 1, |_| false), w(5000, 1, 0));
    assert_eq!(ra.sync_ra(90, 2, |_| false), w(90, 2, 0));
}

#[test]
fn no_backward_readahead() {
    // Reading backwards never looks like a sequential miss (index - prev_index wraps), and
    // the history check looks only below the index: each page is read alone.
    let mut ra = RaState::new(32);
    ra.sync_ra(1000, 1, |_| false);
    let mut cached: HashSet<u64> = [1000].into();
    for i in (900..1000).rev() {
        let win = ra.sync_ra(i, 1, |p| cached.contains(&p));
        assert_eq!(win, w(i, 1, 0), "page {i}");
        cached.insert(i);
    }
}

#[test]
fn sequential_miss_after_the_previous_read_starts_a_stream() {
    // page_cache_sync_ra: index - prev_index <= 1 is a sequential cache miss.
    let mut ra = RaState::new(32);
    ra.sync_ra(500, 1, |_| false); // random
    assert_eq!(ra.sync_ra(501, 1, |_| false), w(501, 4, 3));
}

#[test]
fn context_readahead_detects_a_stream_from_cached_history() {
    // page_cache_sync_ra: page_cache_prev_miss finds 10 cached pages before the index, more
    // than the request: treated as sequential, window init_ra_size(10 + 1) = 32 (max), all
    // async.
    let mut ra = RaState::new(32);
    ra.sync_ra(7, 1, |_| false);
    let history = |p: u64| (90..100).contains(&p);
    assert_eq!(ra.sync_ra(100, 1, history), w(100, 32, 32));
}

#[test]
fn oversized_read_is_capped_by_the_window() {
    // page_cache_sync_ra: req_count > max_pages goes to the initial-window case with
    // get_init_ra_size = max.
    let mut ra = RaState::new(8);
    ra.sync_ra(3, 1, |_| false);
    assert_eq!(ra.sync_ra(1000, 64, |_| false), w(1000, 8, 8));
}

#[test]
fn fadvise_random_disables_and_sequential_doubles() {
    // generic_fadvise: RANDOM sets FMODE_RANDOM (force_page_cache_ra of the request only);
    // SEQUENTIAL sets ra_pages = 2 * bdi ra_pages; NORMAL restores the bdi value.
    let mut ra = RaState::new(32);
    ra.fadvise(Advice::Random, 32);
    assert_eq!(ra.sync_ra(0, 1, |_| false), w(0, 1, 0));
    assert_eq!(ra.async_ra(0, 1, |_| false), None);
    assert_eq!(ra.mmap_sync(50, |_| false), None);
    ra.fadvise(Advice::Sequential, 32);
    assert_eq!(ra.ra_pages, 64);
    // init_ra_size(16, 64) = 32 (16 <= 64 / 4 doubles), async part 32 - 16.
    assert_eq!(ra.sync_ra(0, 16, |_| false), w(0, 32, 16));
    ra.fadvise(Advice::Normal, 32);
    assert_eq!(ra.ra_pages, 32);
}

#[test]
fn zero_readahead_reads_only_the_request() {
    // read_ahead_kb = 0: ra_pages 0, page_cache_sync_ra reads the requested pages only.
    let mut ra = RaState::new(0);
    assert_eq!(ra.sync_ra(0, 1, |_| false), w(0, 1, 0));
    assert_eq!(ra.mmap_sync(10, |_| false), None);
}

#[test]
fn mmap_fault_reads_around_the_fault() {
    // do_sync_mmap_readahead: ra->start = pgoff - ra_pages / 2, size ra_pages, async_size
    // ra_pages / 4 (marker 3/4 through the window); clipped at the start of the file.
    let mut ra = RaState::new(32);
    let win = ra.mmap_sync(100, |_| false).unwrap();
    assert_eq!(win, w(84, 32, 8));
    assert_eq!(win.marker(), Some(108));
    assert_eq!(ra.mmap_sync(5, |_| false).unwrap(), w(0, 32, 8));
}

#[test]
fn mmap_read_around_stops_after_lots_of_misses_and_hits_restore_it() {
    // do_sync_mmap_readahead: mmap_miss counts misses; above MMAP_LOTSAMISS (100) no
    // read-around; do_async_mmap_readahead decrements it on every cached fault.
    let mut ra = RaState::new(32);
    for i in 0..MMAP_LOTSAMISS {
        assert!(ra.mmap_sync(i as u64 * 1000, |_| false).is_some(), "miss {i}");
    }
    assert_eq!(ra.mmap_sync(999_999, |_| false), None);
    for _ in 0..5 {
        ra.mmap_async(1, false, |_| false);
    }
    assert!(ra.mmap_sync(5_000_000, |_| false).is_some());
}

#[test]
fn mmap_marker_hit_continues_asynchronously() {
    // do_async_mmap_readahead -> page_cache_async_ra at the marker of a read-around window.
    let mut ra = RaState::new(32);
    let first = ra.mmap_sync(100, |_| false).unwrap();
    let next = ra.mmap_async(first.marker().unwrap(), true, |_| true).unwrap();
    assert_eq!(next, w(116, 32, 32));
}

#[test]
fn fadvise_sequential_faults_read_forward() {
    // do_sync_mmap_readahead: VM_SEQ_READ -> page_cache_sync_ra(ra_pages) forward from the fault.
    let mut ra = RaState::new(16);
    ra.fadvise(Advice::Sequential, 16);
    assert_eq!(ra.mmap_sync(0, |_| false).unwrap(), w(0, 32, 32));
}
