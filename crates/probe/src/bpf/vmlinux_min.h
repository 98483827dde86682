/* The few kernel types iolearn's probes read, declared for CO-RE.
 *
 * Instead of a 3 MB `bpftool btf dump` of one kernel, each struct carries
 * `preserve_access_index`: clang records every field access as a relocation, and libbpf
 * rewrites the offsets against the running kernel's BTF (/sys/kernel/btf/vmlinux) at load
 * time. Field names and types must match the kernel's; their order and the struct sizes do
 * not. These are the raw tracepoints' arguments (the kernel objects the tracepoints of
 * include/trace/events/{filemap,readahead,block,syscalls}.h are called with) and what the
 * open-file iterator and the read count read. */
#ifndef IOLEARN_VMLINUX_MIN_H
#define IOLEARN_VMLINUX_MIN_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u64 __be64;
typedef __u16 __le16;
typedef __u32 __le32;
typedef __u64 __le64;
typedef __u32 __wsum;
typedef __u16 __sum16;
typedef __u32 dev_t;
typedef __u64 sector_t;
typedef long long loff_t;
typedef _Bool bool;
enum { false = 0, true = 1 };

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_PERCPU_HASH = 10,
	BPF_MAP_TYPE_RINGBUF = 27,
};

/* bpf_ringbuf_submit()'s flags and bpf_ringbuf_query()'s question (include/uapi/linux/bpf.h). */
enum {
	BPF_RB_NO_WAKEUP = 1,
	BPF_RB_FORCE_WAKEUP = 2,
};
enum {
	BPF_RB_AVAIL_DATA = 0,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

/* The open-file iterator (kernel/bpf/task_iter.c, include/linux/fs.h). The iterator's
 * pointers are unions of a pointer and a u64 in the kernel (__bpf_md_ptr); a plain pointer at
 * the same offset reads the same on 64-bit. */
struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
	__u64 session_id;
	__u64 seq_num;
};

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
};

struct files_struct {
	struct fdtable *fdt;
};

/* x86's: TS_COMPAT in `status` marks a 32-bit system call. */
struct thread_info {
	__u32 status;
};

struct sched_entity {
	__u64 sum_exec_runtime;
};

struct task_struct {
	struct thread_info thread_info;
	int pid;
	int tgid;
	struct files_struct *files;
	__u64 utime;
	__u64 stime;
	struct sched_entity se;
};

/* The registers saved at a system call's entry (x86-64): its number and its six arguments
 * (di, si, dx, r10, r8, r9), still there at its exit. */
struct pt_regs {
	unsigned long r10;
	unsigned long r9;
	unsigned long r8;
	unsigned long dx;
	unsigned long si;
	unsigned long di;
	unsigned long orig_ax;
};

struct file_ra_state {
	unsigned int size;
	unsigned int ra_pages;
	unsigned int mmap_miss;
};

struct super_block {
	dev_t s_dev;
};

struct inode {
	unsigned short i_mode;
	unsigned long i_ino;
	struct super_block *i_sb;
	loff_t i_size;
};

/* The raw tracepoints' own arguments (tp_btf programs read them directly). */
struct address_space {
	struct inode *host;
};
/* A folio's flags: a struct around the word since Linux 6.18, the word itself before. */
typedef struct {
	unsigned long f;
} memdesc_flags_t;
enum pageflags {
	PG_head = 6,
};
struct folio {
	memdesc_flags_t flags;
	struct address_space *mapping;
	unsigned long index;
	unsigned long _flags_1; /* the order in its low byte (large folios) */
};
struct folio___old {
	unsigned long flags;
};
struct gendisk {
	int major;
	int first_minor;
};
struct request_queue {
	struct gendisk *disk;
};
struct bio {
	unsigned short bi_ioprio;
};
struct request {
	struct request_queue *q;
	unsigned int cmd_flags; /* blk_opf_t: the operation in its low 8 bits */
	sector_t __sector;
	unsigned int __data_len;
	struct bio *bio;
};
/* Before 6.10 a request kept its own copy of the priority. */
struct request___old {
	unsigned short ioprio;
};

struct file {
	unsigned int f_mode;
	struct inode *f_inode;
	struct file_ra_state f_ra;
};

struct bpf_iter__task_file {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
	__u32 fd;
	struct file *file;
};

struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
};

#pragma clang attribute pop

#endif
