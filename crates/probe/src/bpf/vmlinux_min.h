/* The few kernel types iolearn's probes read, declared for CO-RE.
 *
 * Instead of a 3 MB `bpftool btf dump` of one kernel, each struct carries
 * `preserve_access_index`: clang records every field access as a relocation, and libbpf
 * rewrites the offsets against the running kernel's BTF (/sys/kernel/btf/vmlinux) at load
 * time. Field names and types must match the kernel's; their order and the struct sizes do
 * not. These are the tracepoint records of include/trace/events/{filemap,readahead,block}.h
 * (Linux 6.x). */
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
	BPF_MAP_TYPE_RINGBUF = 27,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct trace_entry {
	unsigned short type;
	unsigned char flags;
	unsigned char preempt_count;
	int pid;
};

/* filemap:mm_filemap_add_to_page_cache (one folio of 1 << order pages) */
struct trace_event_raw_mm_filemap_op_page_cache {
	struct trace_entry ent;
	unsigned long pfn;
	unsigned long i_ino;
	unsigned long index;
	dev_t s_dev;
	unsigned char order;
};

/* filemap:mm_filemap_get_pages (a read() looking up pages index..last_index) */
struct trace_event_raw_mm_filemap_op_page_cache_range {
	struct trace_entry ent;
	unsigned long i_ino;
	dev_t s_dev;
	unsigned long index;
	unsigned long last_index;
};

/* filemap:mm_filemap_fault (a page fault on a file mapping) */
struct trace_event_raw_mm_filemap_fault {
	struct trace_entry ent;
	unsigned long i_ino;
	dev_t s_dev;
	unsigned long index;
};

/* readahead:page_cache_sync_ra, readahead:page_cache_async_ra */
struct trace_event_raw_page_cache_ra_op {
	struct trace_entry ent;
	unsigned long i_ino;
	dev_t s_dev;
	unsigned long index;
	unsigned int order;
	unsigned int size;
	unsigned int async_size;
	unsigned int ra_pages;
	unsigned int mmap_miss;
	loff_t prev_pos;
	unsigned long req_count;
};

/* block:block_rq_issue */
struct trace_event_raw_block_rq {
	struct trace_entry ent;
	dev_t dev;
	sector_t sector;
	unsigned int nr_sector;
	unsigned int bytes;
	char rwbs[10];
};

/* block:block_rq_complete */
struct trace_event_raw_block_rq_completion {
	struct trace_entry ent;
	dev_t dev;
	sector_t sector;
	unsigned int nr_sector;
	int error;
	char rwbs[10];
};

/* The open-file iterator (kernel/bpf/task_iter.c, include/linux/fs.h). The iterator's
 * pointers are unions of a pointer and a u64 in the kernel (__bpf_md_ptr); a plain pointer at
 * the same offset reads the same on 64-bit. */
struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
	__u64 session_id;
	__u64 seq_num;
};

struct task_struct {
	int pid;
	int tgid;
};

struct file_ra_state {
	unsigned int ra_pages;
	unsigned int mmap_miss;
};

struct super_block {
	dev_t s_dev;
};

struct inode {
	unsigned long i_ino;
	struct super_block *i_sb;
};

/* The raw tracepoints' own arguments (tp_btf programs read them directly). */
struct address_space {
	struct inode *host;
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

#pragma clang attribute pop

#endif
