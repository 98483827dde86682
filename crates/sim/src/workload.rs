//! Workload generators: RocksDB `db_bench` benchmarks over an LSM-like set of files, and
//! fio-style patterns. A generator turns each operation into page accesses (with the CPU time
//! around them); the engine plays them against the page cache and device.

use iolearn_ml::Rng;

/// Page size.
pub const PAGE_BYTES: u64 = 4096;

/// The workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    /// Point lookups of uniformly random keys.
    ReadRandom,
    /// Forward scan from the first key.
    ReadSeq,
    /// Backward scan from the last key.
    ReadReverse,
    /// 90% random reads, 10% random writes (db_bench's default `readwritepercent`).
    ReadRandomWriteRandom,
    /// Read-modify-write of random keys.
    UpdateRandom,
    /// Facebook's production mix (Get 85%, Put 14%, Seek 1%) with KML's key-range
    /// distribution parameters (`shared/spec/kml.md` section 3).
    MixGraph,
    /// fio: sequential `read()`s of `pages` pages through one file.
    FioSeq {
        /// Pages per read.
        pages: u32,
    },
    /// fio: random `read()`s of `pages` pages.
    FioRandom {
        /// Pages per read.
        pages: u32,
    },
    /// fio: reads of `pages` pages every `stride` pages.
    FioStrided {
        /// Pages per read.
        pages: u32,
        /// Distance between read starts, in pages.
        stride: u32,
    },
}

impl WorkloadKind {
    /// The db_bench or fio name.
    pub fn name(&self) -> String {
        match self {
            WorkloadKind::ReadRandom => "readrandom".into(),
            WorkloadKind::ReadSeq => "readseq".into(),
            WorkloadKind::ReadReverse => "readreverse".into(),
            WorkloadKind::ReadRandomWriteRandom => "readrandomwriterandom".into(),
            WorkloadKind::UpdateRandom => "updaterandom".into(),
            WorkloadKind::MixGraph => "mixgraph".into(),
            WorkloadKind::FioSeq { pages } => format!("fio-seq-{pages}"),
            WorkloadKind::FioRandom { pages } => format!("fio-random-{pages}"),
            WorkloadKind::FioStrided { pages, stride } => format!("fio-strided-{pages}-{stride}"),
        }
    }

    /// Parse a name as printed by [`WorkloadKind::name`] (fio ones with their numbers).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "readrandom" => WorkloadKind::ReadRandom,
            "readseq" => WorkloadKind::ReadSeq,
            "readreverse" => WorkloadKind::ReadReverse,
            "readrandomwriterandom" => WorkloadKind::ReadRandomWriteRandom,
            "updaterandom" => WorkloadKind::UpdateRandom,
            "mixgraph" => WorkloadKind::MixGraph,
            _ => {
                let parts: Vec<&str> = s.split('-').collect();
                let num = |i: usize| parts.get(i).and_then(|v| v.parse::<u32>().ok()).filter(|&v| v > 0);
                match parts.get(..2)? {
                    ["fio", "seq"] => WorkloadKind::FioSeq { pages: num(2)? },
                    ["fio", "random"] => WorkloadKind::FioRandom { pages: num(2)? },
                    ["fio", "strided"] => WorkloadKind::FioStrided {
                        pages: num(2)?,
                        stride: num(3)?,
                    },
                    _ => return None,
                }
            }
        })
    }

    /// The six db_bench workloads of KML's evaluation.
    pub fn dbbench() -> [WorkloadKind; 6] {
        [
            WorkloadKind::ReadRandom,
            WorkloadKind::ReadSeq,
            WorkloadKind::ReadReverse,
            WorkloadKind::ReadRandomWriteRandom,
            WorkloadKind::UpdateRandom,
            WorkloadKind::MixGraph,
        ]
    }
}

/// The shape of the simulated database: sorted runs of fixed-size entries packed into data
/// blocks, blocks packed back to back into SST files (so a block often spans two pages, as in
/// RocksDB without alignment), plus a write-ahead log.
#[derive(Debug, Clone, PartialEq)]
pub struct DbShape {
    /// Keys in the database.
    pub keys: u64,
    /// Bytes per entry (key + value + overhead): KML's 48 B keys, 150 B values.
    pub entry_bytes: u64,
    /// Target data block size (RocksDB `block_size`, 4 KiB).
    pub block_bytes: u64,
    /// SST file size (RocksDB's default target, 64 MiB).
    pub file_bytes: u64,
}

impl DbShape {
    /// The calibration database: 12M keys x 198 B ~ 2.3 GiB (`shared/reference/calibration`).
    pub fn calibration() -> Self {
        DbShape {
            keys: 12_000_000,
            entry_bytes: 198,
            block_bytes: 4096,
            file_bytes: 64 << 20,
        }
    }

    /// A database of about `bytes`.
    pub fn of_size(bytes: u64) -> Self {
        let entry = 198;
        DbShape {
            keys: (bytes / entry).max(1000),
            entry_bytes: entry,
            block_bytes: 4096,
            file_bytes: 64 << 20,
        }
    }

    fn entries_per_block(&self) -> u64 {
        (self.block_bytes / self.entry_bytes).max(1)
    }

    fn stored_block_bytes(&self) -> u64 {
        // Entries plus RocksDB's 5-byte block trailer.
        self.entries_per_block() * self.entry_bytes + 5
    }

    fn blocks_per_file(&self) -> u64 {
        (self.file_bytes / self.stored_block_bytes()).max(1)
    }

    /// Number of data blocks.
    pub fn blocks(&self) -> u64 {
        self.keys.div_ceil(self.entries_per_block())
    }

    /// Number of SST files (their ids are `0..files`; the WAL is file `files`).
    pub fn files(&self) -> u32 {
        self.blocks().div_ceil(self.blocks_per_file()) as u32
    }

    /// Total bytes of the SST files.
    pub fn bytes(&self) -> u64 {
        self.blocks() * self.stored_block_bytes()
    }

    /// Pages of SST data.
    pub fn pages(&self) -> u64 {
        self.bytes().div_ceil(PAGE_BYTES)
    }

    /// The pages holding data block `block`: (file, first page, page count).
    pub fn block_pages(&self, block: u64) -> (u32, u64, u32) {
        let per = self.blocks_per_file();
        let file = (block / per) as u32;
        let off = (block % per) * self.stored_block_bytes();
        let first = off / PAGE_BYTES;
        let last = (off + self.stored_block_bytes() - 1) / PAGE_BYTES;
        (file, first, (last - first + 1) as u32)
    }

    /// The block holding key `key`.
    pub fn block_of(&self, key: u64) -> u64 {
        key.min(self.keys - 1) / self.entries_per_block()
    }

    /// Pages in SST file `file`.
    pub fn file_pages(&self, file: u32) -> u64 {
        let per = self.blocks_per_file();
        let blocks = (self.blocks() - file as u64 * per).min(per);
        (blocks * self.stored_block_bytes()).div_ceil(PAGE_BYTES)
    }
}

/// How an access reaches the page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessMode {
    /// Loads from an mmapped file (RocksDB `mmap_read`): page faults and fault readahead.
    Mmap,
    /// `read()` system calls.
    Read,
}

/// One step of an operation: touch `pages` pages from `index` of `file` (in that order, or
/// backwards for a reverse scan), or dirty them (a write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// File id.
    pub file: u32,
    /// First page.
    pub index: u64,
    /// Pages.
    pub pages: u32,
    /// Through mmap or read().
    pub mode: AccessMode,
    /// A write (the pages become dirty; no read of the device is needed for whole pages).
    pub write: bool,
}

/// One operation: its page accesses and the CPU time it needs besides them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Op {
    /// Page accesses in order.
    pub accesses: Vec<Access>,
    /// CPU time of the operation itself.
    pub cpu_ns: u64,
}

/// CPU costs of db_bench operations, fitted to the calibration runs: a cached readrandom
/// does about 240K ops/s; readseq peaks near 4.2M keys/s and readreverse near 2.5M keys/s
/// (RocksDB's backward iteration costs more per key).
const GET_CPU_NS: u64 = 4_000;
const SCAN_CPU_NS: u64 = 200;
const REVERSE_SCAN_CPU_NS: u64 = 380;
const PUT_CPU_NS: u64 = 5_000;

/// Generates the operations of one workload thread.
#[derive(Debug, Clone)]
pub struct Generator {
    kind: WorkloadKind,
    db: DbShape,
    mode: AccessMode,
    rng: Rng,
    /// Scans: next key. fio: next page.
    cursor: u64,
    /// WAL bytes written so far.
    wal_bytes: u64,
    /// Key-range CDF for mixgraph.
    ranges: Vec<f64>,
}

impl Generator {
    /// A generator for `kind` over `db`, reading through `mode`, with its own seed.
    pub fn new(kind: WorkloadKind, db: DbShape, mode: AccessMode, seed: u64) -> Self {
        let cursor = match kind {
            WorkloadKind::ReadReverse => db.keys - 1,
            _ => 0,
        };
        // KML's mixgraph: keyrange_dist_a/b/c/d = 14.18, -2.917, 0.0164, -0.08082 over 30
        // key ranges; as db_bench's GenerateTwoTermExpKeys, range `pfx` (1-based) is chosen
        // with weight a*exp(b*pfx) + c*exp(d*pfx), keys uniform inside it.
        let ranges = if kind == WorkloadKind::MixGraph {
            let (a, b, c, d) = (14.18f64, -2.917f64, 0.0164f64, -0.08082f64);
            let w: Vec<f64> = (1..=30)
                .map(|pfx| a * (b * pfx as f64).exp() + c * (d * pfx as f64).exp())
                .collect();
            let total: f64 = w.iter().sum();
            let mut acc = 0.0;
            w.iter()
                .map(|v| {
                    acc += v / total;
                    acc
                })
                .collect()
        } else {
            Vec::new()
        };
        Generator {
            kind,
            db,
            mode,
            rng: Rng::new(seed),
            cursor,
            wal_bytes: 0,
            ranges,
        }
    }

    /// The workload.
    pub fn kind(&self) -> WorkloadKind {
        self.kind
    }

    /// Touch the data block holding `key`.
    fn read_block(&self, key: u64, op: &mut Op) {
        let (file, index, pages) = self.db.block_pages(self.db.block_of(key));
        op.accesses.push(Access {
            file,
            index,
            pages,
            mode: self.mode,
            write: false,
        });
    }

    fn get(&mut self, key: u64, op: &mut Op) {
        self.read_block(key, op);
        op.cpu_ns += GET_CPU_NS;
    }

    fn put(&mut self, op: &mut Op) {
        // A put lands in the memtable and appends to the write-ahead log (file `files`).
        let wal = self.db.files();
        let page = self.wal_bytes / PAGE_BYTES;
        self.wal_bytes += self.db.entry_bytes;
        op.accesses.push(Access {
            file: wal,
            index: page,
            pages: 1,
            mode: AccessMode::Read,
            write: true,
        });
        op.cpu_ns += PUT_CPU_NS;
    }

    fn scan_step(&mut self, forward: bool, op: &mut Op) {
        let key = self.cursor;
        let per_block = self.db.entries_per_block();
        // Touch the block when the scan enters it (first key forward, last key backward).
        let enters = if forward {
            key.is_multiple_of(per_block)
        } else {
            key % per_block == per_block - 1 || key == self.db.keys - 1
        };
        if enters {
            self.read_block(key, op);
        }
        op.cpu_ns += if forward { SCAN_CPU_NS } else { REVERSE_SCAN_CPU_NS };
        self.cursor = if forward {
            if key + 1 >= self.db.keys {
                0
            } else {
                key + 1
            }
        } else if key == 0 {
            self.db.keys - 1
        } else {
            key - 1
        };
    }

    fn mixgraph_key(&mut self) -> u64 {
        let u = self.rng.next_f64();
        let r = self
            .ranges
            .iter()
            .position(|&c| u <= c)
            .unwrap_or(self.ranges.len() - 1) as u64;
        let per = self.db.keys / 30;
        (r * per + self.rng.below(per.max(1) as usize) as u64).min(self.db.keys - 1)
    }

    /// fio: one `read()` of `pages` pages at page `at` of the job's files taken end to end
    /// (fio's `nrfiles` over the database's files, so a job is as large as the database and
    /// not a file the cache holds whole); a read stops at its file's end.
    fn fio_read(&self, at: u64, pages: u32, op: &mut Op) {
        let (mut file, mut index) = (0u32, at);
        while file + 1 < self.db.files() && index >= self.db.file_pages(file) {
            index -= self.db.file_pages(file);
            file += 1;
        }
        let left = self.db.file_pages(file).saturating_sub(index).max(1);
        op.accesses.push(Access {
            file,
            index,
            pages: (pages as u64).min(left) as u32,
            mode: AccessMode::Read,
            write: false,
        });
        op.cpu_ns += 1_000;
    }

    /// Pages of the whole job (every file).
    fn fio_pages(&self) -> u64 {
        (0..self.db.files()).map(|f| self.db.file_pages(f)).sum()
    }

    /// fio: the next read of a forward pattern advancing `step` pages, wrapping at the end.
    fn fio_forward(&mut self, pages: u32, step: u64, op: &mut Op) {
        let total = self.fio_pages().max(pages as u64);
        if self.cursor + pages as u64 > total {
            self.cursor = 0;
        }
        self.fio_read(self.cursor, pages, op);
        self.cursor += step;
    }

    /// The next operation (written into `op`, cleared first, to reuse its buffer).
    pub fn next_op(&mut self, op: &mut Op) {
        op.accesses.clear();
        op.cpu_ns = 0;
        let keys = self.db.keys as usize;
        match self.kind {
            WorkloadKind::ReadRandom => {
                let k = self.rng.below(keys) as u64;
                self.get(k, op);
            }
            WorkloadKind::ReadSeq => self.scan_step(true, op),
            WorkloadKind::ReadReverse => self.scan_step(false, op),
            WorkloadKind::ReadRandomWriteRandom => {
                if self.rng.below(100) < 90 {
                    let k = self.rng.below(keys) as u64;
                    self.get(k, op);
                } else {
                    self.put(op);
                }
            }
            WorkloadKind::UpdateRandom => {
                let k = self.rng.below(keys) as u64;
                self.get(k, op);
                self.put(op);
            }
            WorkloadKind::MixGraph => {
                let r = self.rng.below(100);
                if r < 85 {
                    let k = self.mixgraph_key();
                    self.get(k, op);
                } else if r < 99 {
                    self.put(op);
                } else {
                    // Seek then a short scan (iter_k/iter_sigma give ~10 next() calls).
                    let k = self.mixgraph_key();
                    self.cursor = k;
                    self.get(k, op);
                    for _ in 0..10 {
                        self.scan_step(true, op);
                    }
                }
            }
            WorkloadKind::FioSeq { pages } => self.fio_forward(pages, pages as u64, op),
            WorkloadKind::FioStrided { pages, stride } => self.fio_forward(pages, stride.max(pages) as u64, op),
            WorkloadKind::FioRandom { pages } => {
                let total = self.fio_pages().max(pages as u64);
                let at = self.rng.below((total - pages as u64 + 1) as usize) as u64;
                self.fio_read(at, pages, op);
            }
        }
    }
}
