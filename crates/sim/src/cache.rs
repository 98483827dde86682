//! The page cache: per-file pages on Linux-like active and inactive LRU lists.
//!
//! A page enters the inactive list; a second access while inactive promotes it to the active
//! list (`folio_mark_accessed`); when the inactive list becomes too small for the active one
//! (`inactive_is_low`: inactive * sqrt(10 * GiB) < active) the active tail is demoted; reclaim
//! takes the inactive tail. Dirty pages are written back when reclaimed. Pages being read are
//! in the cache already, "locked" until their I/O completes (`ready_at_ns`).

/// A page: file id and page index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PageKey {
    /// File id.
    pub file: u32,
    /// Page index in the file.
    pub index: u64,
}

/// Slot tables: for each file, page index -> node slot (`NIL` when not cached). Files are
/// dense ranges of pages, so a table lookup replaces a hash lookup (the simulator's hottest
/// operation).
#[derive(Default)]
struct SlotTable {
    files: Vec<Vec<u32>>,
}

impl SlotTable {
    #[inline]
    fn get(&self, key: PageKey) -> Option<u32> {
        let s = *self.files.get(key.file as usize)?.get(key.index as usize)?;
        (s != NIL).then_some(s)
    }

    fn set(&mut self, key: PageKey, slot: u32) {
        let f = key.file as usize;
        if self.files.len() <= f {
            self.files.resize_with(f + 1, Vec::new);
        }
        let t = &mut self.files[f];
        let i = key.index as usize;
        if t.len() <= i {
            t.resize((i + 1).max(t.len() * 2).min(i + (1 << 20)), NIL);
        }
        t[i] = slot;
    }
}

const NIL: u32 = u32::MAX;

#[derive(Debug, Clone)]
struct Node {
    key: PageKey,
    prev: u32,
    next: u32,
    active: bool,
    referenced: bool,
    dirty: bool,
    marker: bool,
    /// The processes that mapped it by a fault or fault-around, a bit each ([`process_bit`]):
    /// their further loads do not enter the kernel (no fault, no readahead check) until the
    /// page is reclaimed; another process's first load still faults.
    mapped: u64,
    ready_at_ns: u64,
}

#[derive(Debug, Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
    len: u64,
}

impl List {
    const EMPTY: List = List {
        head: NIL,
        tail: NIL,
        len: 0,
    };
}

/// What a lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cached {
    /// When the page's read completes (in the past for an up-to-date page).
    pub ready_at_ns: u64,
    /// Whether the page carried the readahead marker (cleared by a lookup the kernel sees).
    pub marker: bool,
    /// Whether the page was already mapped into the accessing process (an mmap load then
    /// never reaches the kernel).
    pub mapped: bool,
}

/// A page reclaimed from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evicted {
    /// The page.
    pub key: PageKey,
    /// It was dirty: the caller must write it back.
    pub dirty: bool,
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups that found the page.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Pages inserted.
    pub inserted: u64,
    /// Pages reclaimed.
    pub evicted: u64,
    /// Dirty pages reclaimed (written back).
    pub written_back: u64,
}

/// A process's bit in a page's `mapped` set. Processes beyond 64 share bits (a load then
/// may be taken for mapped where it would fault: the simulations run a few processes).
fn process_bit(process: u32) -> u64 {
    1 << (process % 64)
}

/// The page cache.
pub struct PageCache {
    capacity: u64,
    map: SlotTable,
    nodes: Vec<Node>,
    free: Vec<u32>,
    active: List,
    inactive: List,
    inactive_ratio: u64,
    stats: CacheStats,
}

impl PageCache {
    /// A cache of `capacity_pages` 4 KiB pages.
    pub fn new(capacity_pages: u64) -> Self {
        let gib = (capacity_pages * 4096) >> 30;
        let inactive_ratio = if gib > 0 { ((10 * gib) as f64).sqrt() as u64 } else { 1 };
        PageCache {
            capacity: capacity_pages.max(1),
            map: SlotTable::default(),
            nodes: Vec::new(),
            free: Vec::new(),
            active: List::EMPTY,
            inactive: List::EMPTY,
            inactive_ratio: inactive_ratio.max(1),
            stats: CacheStats::default(),
        }
    }

    /// Capacity in pages.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Pages held.
    pub fn len(&self) -> u64 {
        self.active.len + self.inactive.len
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counters.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Whether a page is cached (no side effects: for readahead's history checks).
    pub fn contains(&self, key: PageKey) -> bool {
        self.map.get(key).is_some()
    }

    /// Whether a page is on the active list (for tests).
    pub fn is_active(&self, key: PageKey) -> Option<bool> {
        self.map.get(key).map(|s| self.nodes[s as usize].active)
    }

    /// Look a page up as an access: counts a hit or miss and marks it accessed (promoting an
    /// inactive page that was already referenced). For a `read()` or a fault on an unmapped
    /// page (`mmap` false, or the page not yet mapped) the readahead marker is cleared and
    /// returned; an mmap load maps the page into `process`.
    pub fn access(&mut self, key: PageKey, mmap: bool, process: u32) -> Option<Cached> {
        let Some(slot) = self.map.get(key) else {
            self.stats.misses += 1;
            return None;
        };
        self.stats.hits += 1;
        let n = &mut self.nodes[slot as usize];
        let bit = process_bit(process);
        let mapped = n.mapped & bit != 0;
        let kernel_sees = !(mmap && mapped);
        let found = Cached {
            ready_at_ns: n.ready_at_ns,
            marker: kernel_sees && n.marker,
            mapped,
        };
        if kernel_sees {
            n.marker = false;
        }
        if mmap {
            n.mapped |= bit;
        }
        if n.active {
            n.referenced = true;
        } else if n.referenced {
            self.unlink(slot);
            self.nodes[slot as usize].active = true;
            self.nodes[slot as usize].referenced = false;
            self.push_head(slot, true);
            self.balance();
        } else {
            n.referenced = true;
        }
        Some(found)
    }

    /// The access that caused a page's read, after the read was issued: the page counts as
    /// referenced (and mapped into `process`, for a fault) without counting a second lookup.
    /// Returns when the page's read completes.
    pub fn settle(&mut self, key: PageKey, mmap: bool, process: u32) -> Option<u64> {
        let slot = self.map.get(key)?;
        let n = &mut self.nodes[slot as usize];
        n.referenced = true;
        if mmap {
            n.mapped |= process_bit(process);
        }
        Some(n.ready_at_ns)
    }

    /// Fault-around (`filemap_map_pages`): map page `key` into `process` if it is cached, up
    /// to date at `now_ns`, not mapped there yet and not a readahead marker (those must fault
    /// to trigger readahead). Returns whether it was mapped.
    pub fn map_around(&mut self, key: PageKey, now_ns: u64, process: u32) -> bool {
        match self.map.get(key) {
            Some(slot) => {
                let n = &mut self.nodes[slot as usize];
                let bit = process_bit(process);
                if n.mapped & bit != 0 || n.marker || n.ready_at_ns > now_ns {
                    return false;
                }
                n.mapped |= bit;
                true
            }
            None => false,
        }
    }

    /// Mark a cached page dirty (a write through the cache or a store to an mmapped page).
    pub fn mark_dirty(&mut self, key: PageKey) -> bool {
        match self.map.get(key) {
            Some(slot) => {
                self.nodes[slot as usize].dirty = true;
                true
            }
            None => false,
        }
    }

    /// Insert a page being read (ready at `ready_at_ns`), optionally carrying the readahead
    /// marker; reclaims pages as needed and appends them to `evicted`. An already cached page
    /// is left as it is.
    pub fn insert(&mut self, key: PageKey, ready_at_ns: u64, marker: bool, dirty: bool, evicted: &mut Vec<Evicted>) {
        if self.map.get(key).is_some() {
            return;
        }
        self.insert_absent(key, ready_at_ns, marker, dirty, evicted);
    }

    /// [`PageCache::insert`] for a page the caller just saw absent (saves a lookup on the
    /// readahead path, the simulator's hottest loop).
    pub fn insert_absent(
        &mut self,
        key: PageKey,
        ready_at_ns: u64,
        marker: bool,
        dirty: bool,
        evicted: &mut Vec<Evicted>,
    ) {
        debug_assert!(self.map.get(key).is_none());
        while self.len() >= self.capacity {
            match self.reclaim() {
                Some(e) => evicted.push(e),
                None => break,
            }
        }
        let node = Node {
            key,
            prev: NIL,
            next: NIL,
            active: false,
            referenced: false,
            dirty,
            marker,
            mapped: 0,
            ready_at_ns,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.nodes[s as usize] = node;
                s
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.map.set(key, slot);
        self.push_head(slot, false);
        self.stats.inserted += 1;
    }

    /// Drop every page (`echo 1 > /proc/sys/vm/drop_caches`); dirty pages are returned for
    /// writeback.
    pub fn drop_all(&mut self, evicted: &mut Vec<Evicted>) {
        while let Some(e) = self.reclaim() {
            evicted.push(e);
        }
    }

    fn reclaim(&mut self) -> Option<Evicted> {
        if self.inactive.len == 0 {
            self.demote_one();
        }
        let slot = self.inactive.tail;
        if slot == NIL {
            return None;
        }
        self.unlink(slot);
        let n = &self.nodes[slot as usize];
        let e = Evicted {
            key: n.key,
            dirty: n.dirty,
        };
        let key = n.key;
        self.map.set(key, NIL);
        self.free.push(slot);
        self.stats.evicted += 1;
        self.stats.written_back += e.dirty as u64;
        Some(e)
    }

    fn balance(&mut self) {
        while self.inactive.len * self.inactive_ratio < self.active.len {
            self.demote_one();
        }
    }

    fn demote_one(&mut self) {
        let slot = self.active.tail;
        if slot == NIL {
            return;
        }
        self.unlink(slot);
        let n = &mut self.nodes[slot as usize];
        n.active = false;
        n.referenced = false;
        self.push_head(slot, false);
    }

    fn list(&mut self, active: bool) -> &mut List {
        if active {
            &mut self.active
        } else {
            &mut self.inactive
        }
    }

    fn push_head(&mut self, slot: u32, active: bool) {
        let old = self.list(active).head;
        {
            let n = &mut self.nodes[slot as usize];
            n.active = active;
            n.prev = NIL;
            n.next = old;
        }
        if old != NIL {
            self.nodes[old as usize].prev = slot;
        }
        let l = self.list(active);
        l.head = slot;
        if l.tail == NIL {
            l.tail = slot;
        }
        l.len += 1;
    }

    fn unlink(&mut self, slot: u32) {
        let (prev, next, active) = {
            let n = &self.nodes[slot as usize];
            (n.prev, n.next, n.active)
        };
        if prev != NIL {
            self.nodes[prev as usize].next = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        }
        let l = self.list(active);
        if l.head == slot {
            l.head = next;
        }
        if l.tail == slot {
            l.tail = prev;
        }
        l.len -= 1;
    }
}
