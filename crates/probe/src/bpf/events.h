/* Shared between the BPF program and user space (crates/probe/src/lib.rs mirrors it). */
#ifndef IOLEARN_EVENTS_H
#define IOLEARN_EVENTS_H

#define MAX_FILES 16384
#define LAT_BUCKETS 24

enum event_kind { EV_ADD = 1, EV_ACCESS = 2 };

/* Sums are kept per file and process: Linux keeps readahead state per open file description,
 * and a file read by a scanner and a random reader at once is two streams, not one. */
struct file_key {
	__u64 ino;
	__u32 dev;
	__u32 tgid;
};

/* KML's per-window sums over one stream of page indices. */
struct page_sums {
	__u64 n;
	__u64 sum;
	__u64 sum_sq;
	__u64 min;
	__u64 max;
	__u64 sum_abs_delta;
	__u64 last;
	__u32 tgid;
	__u32 pad;
	/* Beyond KML (policy's WindowStats::shape): the first index, and when the first and last
	 * were seen (per-CPU copies are joined by time); the last jump (a delta other than 0 and
	 * +1) and how many jumps; of the jumps after the first, how many and how many equalled the
	 * one before. */
	__u64 first;
	__u64 first_ns;
	__u64 last_ns;
	__s64 prev_jump;
	__u64 jumps;
	__u64 jump_pairs;
	__u64 jump_same;
};

/* One open file description of a watched process on the device (the open-file iterator). */
struct open_file_mode {
	__u64 ino;
	__u32 tgid;
	__u32 fd;
	__u32 dev;
	__u32 f_mode;
	__u32 ra_pages;
	__u32 mmap_miss;
};

/* One thread of a watched process (the task iterator): its CPU time as the scheduler keeps it
 * (exact, ns) and the scheduler tick's samples of it, user and kernel (ns, TICK_NSEC a tick
 * the thread was running at; raw, before /proc's adjustment); the kernel's jiffies and clock
 * when it was read (two readings give the tick rate). */
struct task_times {
	__u64 runtime;
	__u64 utime;
	__u64 stime;
	__u64 jiffies;
	__u64 now_ns;
	__u32 tgid;
	__u32 tid;
};

struct page_event {
	__u64 time_ns;
	__u64 ino;
	__u64 index;
	__u64 pages;
	__u32 dev;
	__u32 tgid;
	__u8 kind;
	__u8 pad[3];
	__u32 tid;
};

/* The scheduler books' events (sched.bpf.c). */
#define SCHED_DEVICES 8
enum sched_kind {
	SCHED_INSERT = 0,
	SCHED_ISSUE = 1,
	SCHED_COMPLETE = 2,
	SCHED_MERGED = 3,
};

struct sched_event {
	__u64 ts_ns;
	__u64 rq;
	__u64 sector;
	__u32 bytes;
	__u32 tid;
	__u16 ioprio;
	__u8 kind;
	__u8 device;
	__u8 write;
	__u8 pad[3];
};

enum counter {
	C_PAGES_ADDED,
	C_PAGES_ACCESSED,
	C_OTHER_DEVICE,
	C_OTHER_PROCESS,
	C_BEYOND_MAX_INDEX,
	C_LOST_RING_FULL,
	C_LOST_FILE_TABLE_FULL,
	C_LOST_RQ_TABLE_FULL,
	C_RA_SYNC,
	C_RA_ASYNC,
	C_RA_PAGES,
	C_RQ_ISSUED,
	C_RQ_COMPLETED,
	C_RQ_BYTES,
	C_RQ_LATENCY_NS,
	C_RQ_DEPTH_SUM,
	C_PAGES_READ,
	C_FAULTS,
	N_COUNTERS,
};

#endif
