// SPDX-License-Identifier: GPL-2.0
/* iolearn's readahead probes: page-cache insertions and accesses aggregated in the kernel
 * into KML's per-window sums (per file and per device), readahead decisions, and block
 * requests with latency and queue depth. User space reads and clears the sums once per window
 * and may also take every event from a ring buffer. Nothing here changes the system. */
#include "vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "events.h"

/* Set by user space before loading. */
const volatile __u32 target_dev = 0;     /* kernel dev_t of the device; 0: every device */
const volatile __u8 filter_tgid = 0;     /* 1: only processes whose bit is set in `tgid_bits` */
const volatile __u8 raw_events = 0;      /* 1: also send every event to `events` */
const volatile __u8 count_reads = 0;     /* 1: count the pages reads returned (C_PAGES_READ, on_sys_exit) */
const volatile __u64 max_index = 1000000; /* KML drops page indices above this */

/* The watched processes, one bit per process id (word tgid / 64, bit tgid % 64); user space
 * sizes it for the kernel's pid limit before loading. A bitmap rather than a hash: an array
 * lookup is inlined by the verifier (no helper call, no hashing on every page event), and it
 * holds every pid there can be (a hash of 1,024 silently stopped watching the 1,025th process
 * of a cgroup that starts one per file). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* set at load */
	__type(key, __u32);
	__type(value, __u64);
} tgid_bits SEC(".maps");

/* Windows are double-buffered: the programs add to slot `window_slot`; user space flips it
 * at a window's end and then reads and clears the other slot, so no event falls between a
 * read and a clear. */
volatile __u32 window_slot = 0;

struct file_sums_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_FILES);
	__type(key, struct file_key);
	__type(value, struct page_sums);
};
struct file_sums_map file_sums0 SEC(".maps");
struct file_sums_map file_sums1 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct page_sums);
} device_sums SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, N_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* C_PAGES_READ by process (tgid), since the start: processes sharing a device are judged each
 * against its own vanilla, where one sum lets a scanner's pages outweigh a random reader's.
 * LRU: a table of exited processes makes room by itself (user space also deletes a process
 * it stops watching). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u64);
} reads_by_tgid SEC(".maps");

/* Block requests in flight: issue time by request. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u64);
} rq_start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64);
} in_flight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LAT_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} rq_latency SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

static __always_inline void count(__u32 which, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &which);
	if (c)
		*c += n;
}

static __always_inline bool watched(__u32 tgid)
{
	__u32 word = tgid / 64;
	__u64 *bits = bpf_map_lookup_elem(&tgid_bits, &word);
	return bits && (*bits >> (tgid % 64)) & 1;
}

static __always_inline bool wanted(__u32 dev, __u32 tgid)
{
	if (target_dev && dev != target_dev) {
		count(C_OTHER_DEVICE, 1);
		return false;
	}
	if (filter_tgid && !watched(tgid)) {
		count(C_OTHER_PROCESS, 1);
		return false;
	}
	return true;
}

/* Add pages first..first+n-1, in that order, to one stream's sums: the same arithmetic as
 * adding them one by one (sums of an arithmetic run in closed form). */
static __always_inline void add_run(struct page_sums *s, __u64 first, __u64 n, __u32 tgid, __u64 now)
{
	__u64 last = first + n - 1;
	if (s->n == 0) {
		s->min = first;
		s->max = last;
		s->first = first;
		s->first_ns = now;
	} else {
		if (first < s->min)
			s->min = first;
		if (last > s->max)
			s->max = last;
		s->sum_abs_delta += first > s->last ? first - s->last : s->last - first;
		__s64 d = (__s64)first - (__s64)s->last;
		if (d != 0 && d != 1) {
			if (s->jumps) {
				s->jump_pairs++;
				if (d == s->prev_jump)
					s->jump_same++;
			}
			s->prev_jump = d;
			s->jumps++;
		}
	}
	s->n += n;
	if (n == 1) {
		/* The common case (a random read, a fault): no run arithmetic, and no division. */
		s->sum += first;
		s->sum_sq += first * first;
	} else {
		/* The run's own steps are +1: no jumps. Sums of first..last and of their squares. */
		s->sum_abs_delta += n - 1;
		s->sum += n * first + n * (n - 1) / 2;
		s->sum_sq += n * first * first + first * n * (n - 1) + (n - 1) * n * (2 * n - 1) / 6;
	}
	s->last = last;
	s->last_ns = now;
	s->tgid = tgid;
}

static __always_inline void add_to_file(void *map, struct file_key *key, __u64 index, __u64 n, __u32 tgid,
					__u64 now)
{
	struct page_sums *f = bpf_map_lookup_elem(map, key);
	if (!f) {
		struct page_sums fresh = {};
		bpf_map_update_elem(map, key, &fresh, BPF_NOEXIST);
		f = bpf_map_lookup_elem(map, key);
	}
	if (f)
		add_run(f, index, n, tgid, now);
	else
		count(C_LOST_FILE_TABLE_FULL, n);
}

/* Returns whether the event was the watched device's and processes'. */
static __always_inline bool observe(__u8 kind, __u32 dev, __u64 ino, __u64 index, __u64 n)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!wanted(dev, tgid))
		return false;
	if (index > max_index) {
		count(C_BEYOND_MAX_INDEX, n);
		return true;
	}
	if (index + n - 1 > max_index)
		n = max_index - index + 1;
	__u64 now = bpf_ktime_get_ns();
	count(kind == EV_ADD ? C_PAGES_ADDED : C_PAGES_ACCESSED, n);

	__u32 slot = window_slot & 1;
	struct page_sums *d = bpf_map_lookup_elem(&device_sums, &slot);
	if (d)
		add_run(d, index, n, tgid, now);

	struct file_key key = { .ino = ino, .dev = dev, .tgid = tgid };
	if (slot)
		add_to_file(&file_sums1, &key, index, n, tgid, now);
	else
		add_to_file(&file_sums0, &key, index, n, tgid, now);

	if (raw_events) {
		struct page_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		if (!e) {
			count(C_LOST_RING_FULL, 1);
			return true;
		}
		e->time_ns = bpf_ktime_get_ns();
		e->ino = ino;
		e->index = index;
		e->pages = n;
		e->dev = dev;
		e->tgid = tgid;
		e->kind = kind;
		e->tid = (__u32)bpf_get_current_pid_tgid();
		bpf_ringbuf_submit(e, 0);
	}
	return true;
}

/* Every program attaches to a raw tracepoint (tp_btf) and reads the kernel objects the
 * tracepoint is called with, where a classic tracepoint first copies fields into a perf record
 * (measured: about 0.25 us of a 1.5 us cached read outside the program) and needs tracefs to
 * attach. What is read is what the classic records hold (include/trace/events/filemap.h,
 * readahead.h, block.h); the device is the superblock's, as there. */
static __always_inline bool pages(__u8 kind, struct address_space *mapping, __u64 first, __u64 last)
{
	if (!mapping)
		return false;
	struct inode *host = mapping->host;
	if (!host || last < first)
		return false;
	struct super_block *sb = host->i_sb;
	if (!sb)
		return false;
	return observe(kind, sb->s_dev, host->i_ino, first, last - first + 1);
}

/* C_PAGES_READ: the pages the watched processes' reads of the device's files returned, counted
 * at each read's return from the bytes it returned (a partial page as one): read, pread64,
 * readv, preadv, preadv2, and the in-kernel copies that read a file (sendfile, splice,
 * copy_file_range: cp). Exact where the page-cache tracepoint was not: it fires once per batch
 * of folios with what is left of the request, not at all for a batch whose last folio is still
 * being read (cold 96 KiB reads counted 10% short at 128 KiB of readahead), and runs past the
 * end of the file. fexit on filemap_read would do the same per read and fails to load here
 * (EPERM); the raw system-call exit runs on every system call of every task while attached,
 * so it is loaded only with `count_reads` and attached with the page-cache programs. The
 * application's progress for read-based workloads (`--progress auto`). x86-64's call numbers
 * and registers. */
#define NR_READ 0
#define NR_PREAD64 17
#define NR_READV 19
#define NR_SENDFILE 40
#define NR_SPLICE 275
#define NR_PREADV 295
#define NR_COPY_FILE_RANGE 326
#define NR_PREADV2 327
#define S_IFMT 00170000
#define S_IFREG 0100000
#define TS_COMPAT 0x0002

SEC("tp_btf/sys_exit")
int on_sys_exit(__u64 *ctx)
{
	/* (struct pt_regs *regs, long ret) */
	long ret = (long)ctx[1];
	if (!count_reads || ret <= 0)
		return 0;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (filter_tgid && !watched(tgid))
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	/* A 32-bit process's calls have numbers of their own and arguments in other registers. */
	if (bpf_core_field_exists(task->thread_info.status) && (BPF_CORE_READ(task, thread_info.status) & TS_COMPAT))
		return 0;
	struct pt_regs *regs = (struct pt_regs *)ctx[0];
	unsigned long nr = BPF_CORE_READ(regs, orig_ax);
	__u32 fd; /* the kernel's own truncation: unsigned int, or a negative int made huge */
	switch (nr) {
	case NR_READ:
	case NR_PREAD64:
	case NR_READV:
	case NR_SPLICE:
	case NR_PREADV:
	case NR_COPY_FILE_RANGE:
	case NR_PREADV2:
		fd = BPF_CORE_READ(regs, di);
		break;
	case NR_SENDFILE:
		fd = BPF_CORE_READ(regs, si); /* (out_fd, in_fd, ...) */
		break;
	default:
		return 0;
	}
	/* The file the descriptor names now (the call has returned; a thread closing it in
	 * between is a race we lose by one read). On overlayfs it is the overlay's inode, on a
	 * device of its own: a container's reads through one do not count. */
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return 0;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *file = 0;
	if (bpf_probe_read_kernel(&file, sizeof(file), fds + fd) || !file)
		return 0;
	struct inode *inode = BPF_CORE_READ(file, f_inode);
	if (!inode || (BPF_CORE_READ(inode, i_mode) & S_IFMT) != S_IFREG)
		return 0;
	__u32 dev = BPF_CORE_READ(inode, i_sb, s_dev);
	if (target_dev && dev != target_dev)
		return 0;
	__u64 n = ((__u64)ret + 4095) >> 12;
	count(C_PAGES_READ, n);
	/* This CPU's slot: no other CPU writes it. A new entry is made with this CPU's count and
	 * zeros elsewhere, in place if another CPU made it meanwhile (BPF_ANY: no pages lost). */
	__u64 *mine = bpf_map_lookup_elem(&reads_by_tgid, &tgid);
	if (mine)
		*mine += n;
	else
		bpf_map_update_elem(&reads_by_tgid, &tgid, &n, BPF_ANY);
	return 0;
}

/* folio_nr_pages(): one page unless the folio is large (PG_head), then 1 << the order kept in
 * the low byte of the second page's flags. */
static __always_inline __u64 folio_pages(struct folio *folio)
{
	unsigned long flags;
	if (bpf_core_type_exists(memdesc_flags_t))
		flags = folio->flags.f;
	else
		flags = ((struct folio___old *)folio)->flags;
	if (!(flags >> bpf_core_enum_value(enum pageflags, PG_head) & 1))
		return 1;
	return 1ULL << (folio->_flags_1 & 31);
}

/* A page-cache insertion: one folio. */
SEC("tp_btf/mm_filemap_add_to_page_cache")
int on_add(__u64 *ctx)
{
	/* (struct folio *folio) */
	struct folio *folio = (struct folio *)ctx[0];
	__u64 index = folio->index;
	pages(EV_ADD, folio->mapping, index, index + folio_pages(folio) - 1);
	return 0;
}

SEC("tp_btf/mm_filemap_get_pages")
int on_get_pages(__u64 *ctx)
{
	/* (struct address_space *mapping, pgoff_t index, pgoff_t last_index) */
	pages(EV_ACCESS, (struct address_space *)ctx[0], ctx[1], ctx[2]);
	return 0;
}

SEC("tp_btf/mm_filemap_fault")
int on_fault(__u64 *ctx)
{
	/* (struct address_space *mapping, pgoff_t index) */
	if (pages(EV_ACCESS, (struct address_space *)ctx[0], ctx[1], ctx[1]))
		count(C_FAULTS, 1);
	return 0;
}

static __always_inline void readahead(__u64 *ctx, bool async)
{
	/* (struct inode *inode, pgoff_t index, struct file_ra_state *ra, unsigned long req_count) */
	struct inode *inode = (struct inode *)ctx[0];
	struct file_ra_state *ra = (struct file_ra_state *)ctx[2];
	struct super_block *sb = inode->i_sb;
	if (!sb || !wanted(sb->s_dev, bpf_get_current_pid_tgid() >> 32))
		return;
	count(async ? C_RA_ASYNC : C_RA_SYNC, 1);
	count(C_RA_PAGES, ra->size);
}

SEC("tp_btf/page_cache_sync_ra")
int on_sync_ra(__u64 *ctx)
{
	readahead(ctx, false);
	return 0;
}

SEC("tp_btf/page_cache_async_ra")
int on_async_ra(__u64 *ctx)
{
	readahead(ctx, true);
	return 0;
}

/* The disk's dev_t (disk_devt(): MKDEV(major, first_minor), the kernel's 12:20 split), 0 without
 * a disk, as the classic record has it. */
static __always_inline __u32 request_dev(struct request *rq)
{
	struct gendisk *disk = rq->q->disk;
	return disk ? ((__u32)disk->major << 20) | (__u32)disk->first_minor : 0;
}

/* Block requests: filtered by device only (the issuing context is often not the process).
 * In flight by the request's address: its sector moves as parts of it complete. */
SEC("tp_btf/block_rq_issue")
int on_rq_issue(__u64 *ctx)
{
	/* (struct request *rq) */
	struct request *rq = (struct request *)ctx[0];
	__u32 dev = request_dev(rq);
	if (target_dev && dev != target_dev)
		return 0;
	__u64 key = (__u64)rq;
	__u64 now = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&rq_start, &key, &now, BPF_ANY))
		count(C_LOST_RQ_TABLE_FULL, 1);
	__u32 zero = 0;
	__s64 *q = bpf_map_lookup_elem(&in_flight, &zero);
	__s64 depth = q ? __sync_fetch_and_add(q, 1) + 1 : 0;
	count(C_RQ_ISSUED, 1);
	count(C_RQ_BYTES, rq->__data_len);
	count(C_RQ_DEPTH_SUM, depth > 0 ? depth : 0);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int on_rq_complete(__u64 *ctx)
{
	/* (struct request *rq, blk_status_t error, unsigned int nr_bytes) */
	struct request *rq = (struct request *)ctx[0];
	__u32 dev = request_dev(rq);
	if (target_dev && dev != target_dev)
		return 0;
	__u64 key = (__u64)rq;
	__u64 *start = bpf_map_lookup_elem(&rq_start, &key);
	if (!start)
		return 0; /* issued before we attached */
	__u64 lat = bpf_ktime_get_ns() - *start;
	bpf_map_delete_elem(&rq_start, &key);
	__u32 zero = 0;
	__s64 *q = bpf_map_lookup_elem(&in_flight, &zero);
	if (q)
		__sync_fetch_and_add(q, -1);
	/* log2 buckets of microseconds */
	__u64 us = lat / 1000;
	__u32 b = 0;
#pragma unroll
	for (int i = 0; i < LAT_BUCKETS - 1; i++) {
		if (us >> i)
			b = i + 1;
	}
	__u64 *h = bpf_map_lookup_elem(&rq_latency, &b);
	if (h)
		*h += 1;
	count(C_RQ_COMPLETED, 1);
	count(C_RQ_LATENCY_NS, lat);
	return 0;
}

/* The open files of the watched processes on the device, with what `posix_fadvise` left in
 * them (f_mode's FMODE_RANDOM, f_ra.ra_pages) that user space cannot read anywhere else: the
 * tuner must not wipe an application's POSIX_FADV_RANDOM when it pushes a readahead value.
 * One record per descriptor of a thread-group leader (threads share the table). */
SEC("iter/task_file")
int open_files(struct bpf_iter__task_file *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *task = ctx->task;
	struct file *file = ctx->file;
	if (!task || !file)
		return 0;
	__u32 tgid = BPF_CORE_READ(task, tgid);
	if (BPF_CORE_READ(task, pid) != tgid)
		return 0;
	if (filter_tgid && !watched(tgid))
		return 0;
	struct inode *inode = BPF_CORE_READ(file, f_inode);
	if (!inode)
		return 0;
	__u32 dev = BPF_CORE_READ(inode, i_sb, s_dev);
	if (target_dev && dev != target_dev)
		return 0;
	struct open_file_mode m = {
		.ino = BPF_CORE_READ(inode, i_ino),
		.tgid = tgid,
		.fd = ctx->fd,
		.dev = dev,
		.f_mode = BPF_CORE_READ(file, f_mode),
		.ra_pages = BPF_CORE_READ(file, f_ra.ra_pages),
		.mmap_miss = BPF_CORE_READ(file, f_ra.mmap_miss),
	};
	bpf_seq_write(seq, &m, sizeof(m));
	return 0;
}

/* The CPU time of every thread of the watched processes, read at each window's end: the
 * guardrail's measure of progress for a process that reads through mappings. /proc gives
 * user time only in clock ticks of 10 ms, and as the thread's exact run time split by its
 * user share since it started (cputime_adjust), which lags a change of setting and moves in
 * steps; the exact run time and the tick's raw samples here let user space split each
 * window's run time by that window's samples, with their sampling error known. */
SEC("iter/task")
int task_times(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *task = ctx->task;
	if (!task)
		return 0;
	__u32 tgid = BPF_CORE_READ(task, tgid);
	if (filter_tgid && !watched(tgid))
		return 0;
	struct task_times t = {
		.runtime = BPF_CORE_READ(task, se.sum_exec_runtime),
		.utime = BPF_CORE_READ(task, utime),
		.stime = BPF_CORE_READ(task, stime),
		/* Not CONFIG_HZ (a __kconfig extern): libbpf refuses to load the whole object where
		 * it finds no kernel config to read, and containers often have none. */
		.jiffies = bpf_jiffies64(),
		.now_ns = bpf_ktime_get_ns(),
		.tgid = tgid,
		.tid = BPF_CORE_READ(task, pid),
	};
	bpf_seq_write(seq, &t, sizeof(t));
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
