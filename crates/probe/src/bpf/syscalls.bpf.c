// SPDX-License-Identifier: GPL-2.0
/* Re-Animator's capture on a stock kernel: every system call of the traced processes (and of
 * the processes they start), with its arguments, the paths it names, its entry and return
 * times, its return value and what it returned in a buffer (a stat, a link's target), streamed
 * through a ring buffer. Nothing here changes the system.
 *
 * The raw `sys_enter` / `sys_exit` tracepoints run for every call of every task once attached:
 * the first tests (is the process traced, is the call one we follow) are an array lookup and a
 * bitmap bit. Paths are read at return straight into the record (an exec's at entry, before
 * its image is replaced); a call without paths sends a short record. Per call, the tables user space fills
 * before loading say which arguments are paths and what result to read (built from the call
 * table of `iolearn_trace::sys::calls`, so the two cannot drift apart). */
#include "vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "syscalls.h"

const volatile __u64 wanted[SYS_NR / 64] = {};
const volatile __u8 path_arg[SYS_NR][2] = {};
const volatile __u8 result_kind[SYS_NR] = {};
const volatile __u8 result_arg[SYS_NR] = {};
/* The argument holding a call's data buffer (an iovec array where `data_iov`), for the read
 * and write families; SYS_NO_ARG: none. */
const volatile __u8 data_arg[SYS_NR] = {};
const volatile __u8 data_iov[SYS_NR] = {};
/* Send the data read and written (`--buffers full|hash`; the hash is taken in user space). */
const volatile __u8 capture_data = 0;
/* Bytes waiting in the ring above which no more data is sent (set at load: half the ring). */
const volatile __u64 data_room = 32 << 20;
/* Bytes waiting in the ring above which each record wakes user space (set at load: an eighth
 * of the ring, at most 4 MiB). */
const volatile __u64 wake_at = 4 << 20;
/* A process whose children (not itself) are traced from their creation: iolearn's own pid
 * when it starts the command (0: none). */
const volatile __u32 children_of = 0;

/* Calls not captured: no room in the ring (counted per call number too, in `lost_by_nr`), no
 * room in the table of calls in flight, 32-bit calls (not decoded). */
volatile __u64 lost = 0;
volatile __u64 lost_pending = 0;
volatile __u64 compat_calls = 0;
/* Calls whose data the ring had no room for (their record still goes out, marked). */
volatile __u64 lost_data = 0;

/* The traced processes, a bit per process id (as in readahead.bpf.c); sized at load. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} tgid_bits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SYS_NR);
	__type(key, __u32);
	__type(value, __u64);
} lost_by_nr SEC(".maps");

/* A data record is built here (by size, not type: a typed value would put the struct and its
 * arrays, which have no Default in Rust, into the skeleton). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct sys_data));
} data_scratch SEC(".maps");

/* Calls in flight, by thread. A hash, not an LRU: an eviction would lose a call silently. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct sys_pending);
} pending SEC(".maps");

/* execve's path, by thread, between its entry and its return. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	/* By size (see `data_scratch`'s note). */
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct sys_exec_path));
} exec_paths SEC(".maps");

/* execve's path is read here (it is larger than the stack allows beside the rest). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct sys_exec_path));
} exec_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 << 20); /* set at load */
} sys_events SEC(".maps");

#define TS_COMPAT 0x0002
#define NR_EXECVE 59
#define NR_EXIT 60
#define NR_EXIT_GROUP 231
#define NR_EXECVEAT 322

static __always_inline bool watched(__u32 tgid)
{
	__u32 word = tgid / 64;
	__u64 *bits = bpf_map_lookup_elem(&tgid_bits, &word);
	return bits && (*bits >> (tgid % 64)) & 1;
}

static __always_inline void count_lost(__u32 nr)
{
	__sync_fetch_and_add(&lost, 1);
	__u32 k = nr & (SYS_NR - 1);
	__u64 *c = bpf_map_lookup_elem(&lost_by_nr, &k);
	if (c)
		*c += 1;
}

static __always_inline __u64 arg_of(struct pt_regs *regs, int i)
{
	switch (i) {
	case 0:
		return BPF_CORE_READ(regs, di);
	case 1:
		return BPF_CORE_READ(regs, si);
	case 2:
		return BPF_CORE_READ(regs, dx);
	case 3:
		return BPF_CORE_READ(regs, r10);
	case 4:
		return BPF_CORE_READ(regs, r8);
	default:
		return BPF_CORE_READ(regs, r9);
	}
}

/* Read the path at user address `ptr` into `dst` (SYS_PATH bytes); its length (or
 * SYS_UNREADABLE) into `len`, and whether it was cut short into bit `bit` of `cut`. */
static __always_inline void read_path(char *dst, __u16 *len, __u16 *cut, int bit, __u64 ptr)
{
	long n = bpf_probe_read_user_str(dst, SYS_PATH, (void *)ptr);
	if (n < 0) {
		*len = SYS_UNREADABLE;
		return;
	}
	*len = n > 0 ? n - 1 : 0;
	if (n == SYS_PATH)
		*cut |= 1 << bit;
}

/* No wake-up per record (a wake-up each costs more than the record at these rates): user
 * space drains every millisecond; `wake_at` bytes waiting wake it at once. */
static __always_inline __u64 wakeup_flags(void)
{
	__u64 waiting = bpf_ringbuf_query(&sys_events, BPF_RB_AVAIL_DATA);
	return waiting > wake_at ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

static __always_inline void fill_head(struct sys_head *h, struct sys_pending *p, __u64 pid_tgid)
{
	h->enter_ns = p->enter_ns;
	h->exit_ns = 0;
#pragma unroll
	for (int i = 0; i < 6; i++)
		h->args[i] = p->args[i];
	h->ret = 0;
	h->pid = pid_tgid >> 32;
	h->tid = (__u32)pid_tgid;
	h->nr = p->nr;
	h->path_len[0] = 0;
	h->path_len[1] = 0;
	h->result_len = 0;
	h->cut = 0;
	h->pad = 0;
}

/* Walking a call's data buffer, a chunk (or an iovec) per step of bpf_loop. */
struct data_walk {
	__u64 src;      /* next byte to send */
	__u64 seg_left; /* bytes left at `src` before the next iovec */
	__u64 left;     /* bytes of the call's data left to send */
	__u64 iov;      /* the iovec array (0: one buffer) */
	__u64 iov_n;
	__u64 iov_i;
	__u64 offset;
	__u64 enter_ns;
	__u32 tid;
	__u32 failed;
};

static long data_step(__u64 i, struct data_walk *w)
{
	if (w->left == 0)
		return 1;
	if (w->seg_left == 0) {
		__u64 v[2];
		if (!w->iov || w->iov_i >= w->iov_n ||
		    bpf_probe_read_user(v, sizeof(v), (void *)(w->iov + 16 * w->iov_i))) {
			w->failed = 1;
			return 1;
		}
		w->iov_i += 1;
		w->src = v[0];
		w->seg_left = v[1];
		return 0;
	}
	__u32 zero = 0;
	struct sys_data *d = bpf_map_lookup_elem(&data_scratch, &zero);
	if (!d)
		return 1;
	__u64 n = w->seg_left < w->left ? w->seg_left : w->left;
	if (n > SYS_DATA_CHUNK)
		n = SYS_DATA_CHUNK;
	d->mark = SYS_DATA_MARK;
	d->enter_ns = w->enter_ns;
	d->tid = w->tid;
	d->len = n;
	d->offset = w->offset;
	/* Calls' records come first: data stops where it would leave them less than half the
	 * ring (one large read or write must not crowd out every call of the other CPUs). */
	if (bpf_ringbuf_query(&sys_events, BPF_RB_AVAIL_DATA) + n + sizeof(*d) > data_room) {
		__sync_fetch_and_add(&lost_data, 1);
		w->failed = 1;
		return 1;
	}
	if (bpf_probe_read_user(d->bytes, n, (void *)w->src)) {
		w->failed = 1;
		return 1;
	}
	if (bpf_ringbuf_output(&sys_events, d, __builtin_offsetof(struct sys_data, bytes) + n, wakeup_flags())) {
		__sync_fetch_and_add(&lost_data, 1);
		w->failed = 1;
		return 1;
	}
	w->src += n;
	w->seg_left -= n;
	w->left -= n;
	w->offset += n;
	return 0;
}

/* Send the `ret` bytes a read or write moved, from its buffer (or iovecs), before its record. */
static __always_inline void send_data(struct sys_pending *p, __u32 nr, long ret, __u32 tid)
{
	__u8 a = data_arg[nr];
	if (!capture_data || a >= 6 || ret <= 0)
		return;
	struct data_walk w = {
		.left = ret,
		.enter_ns = p->enter_ns,
		.tid = tid,
	};
	if (data_iov[nr]) {
		w.iov = p->args[a & 7];
		w.iov_n = a < 5 ? p->args[(a + 1) & 7] : 0;
	} else {
		w.src = p->args[a & 7];
		w.seg_left = ret;
	}
	/* A step per chunk, and per iovec a step to load it and one for its last part. */
	__u64 steps = (__u64)ret / SYS_DATA_CHUNK + 2 * w.iov_n + 2;
	bpf_loop(steps > (1 << 23) ? (1 << 23) : steps, data_step, &w, 0);
	/* Not all sent, for want of steps or of iovecs: counted (the call's data is unreadable). */
	if (w.left && !w.failed)
		__sync_fetch_and_add(&lost_data, 1);
}

SEC("tp_btf/sys_enter")
int on_sys_enter(__u64 *ctx)
{
	/* (struct pt_regs *regs, long id) */
	long id = (long)ctx[1];
	if (id < 0 || id >= SYS_NR)
		return 0;
	__u32 nr = (__u32)id;
	if (!((wanted[nr / 64] >> (nr % 64)) & 1))
		return 0;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!watched(pid_tgid >> 32))
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	if (bpf_core_field_exists(task->thread_info.status) && (BPF_CORE_READ(task, thread_info.status) & TS_COMPAT)) {
		__sync_fetch_and_add(&compat_calls, 1);
		return 0;
	}
	struct pt_regs *regs = (struct pt_regs *)ctx[0];
	struct sys_pending p = {
		.enter_ns = bpf_ktime_get_ns(),
		.nr = nr,
	};
#pragma unroll
	for (int i = 0; i < 6; i++)
		p.args[i] = arg_of(regs, i);
	if (nr == NR_EXIT || nr == NR_EXIT_GROUP) {
		/* These never return (and name no path): the record goes out now, without an exit time. */
		struct sys_event_short *e = bpf_ringbuf_reserve(&sys_events, sizeof(*e), 0);
		if (!e) {
			count_lost(nr);
			return 0;
		}
		fill_head(&e->h, &p, pid_tgid);
		bpf_ringbuf_submit(e, wakeup_flags());
		return 0;
	}
	__u32 tid = (__u32)pid_tgid;
	if (nr == NR_EXECVE || nr == NR_EXECVEAT) {
		/* An exec replaces the memory its path is in: read it now. */
		__u32 zero = 0;
		struct sys_exec_path *x = bpf_map_lookup_elem(&exec_scratch, &zero);
		if (x) {
			__u8 a = path_arg[nr][0];
			x->cut = 0;
			read_path(x->path, &x->len, &x->cut, 0, a < 6 ? p.args[a & 7] : 0);
			bpf_map_update_elem(&exec_paths, &tid, x, BPF_ANY);
		}
	}
	if (bpf_map_update_elem(&pending, &tid, &p, BPF_ANY)) {
		__sync_fetch_and_add(&lost_pending, 1);
		count_lost(nr);
	}
	return 0;
}

static __always_inline void read_result(__u8 *result, __u16 *result_len, long ret, __u8 kind, __u64 ptr, __u64 next)
{
	switch (kind) {
	case SYS_RESULT_STAT: {
		/* x86-64 struct stat: st_mode (u32) at 24, st_size (s64) at 48. */
		__u32 mode = 0;
		__u64 size = 0;
		if (ret == 0 && !bpf_probe_read_user(&mode, 4, (void *)(ptr + 24)) &&
		    !bpf_probe_read_user(&size, 8, (void *)(ptr + 48))) {
			__builtin_memcpy(result, &mode, 4);
			__builtin_memcpy(result + 8, &size, 8);
			*result_len = 16;
		}
		break;
	}
	case SYS_RESULT_STATX: {
		/* struct statx: stx_mode (u16) at 0x1c, stx_size (u64) at 0x28. */
		__u16 mode16 = 0;
		__u64 size = 0;
		if (ret == 0 && !bpf_probe_read_user(&mode16, 2, (void *)(ptr + 0x1c)) &&
		    !bpf_probe_read_user(&size, 8, (void *)(ptr + 0x28))) {
			__u32 mode = mode16;
			__builtin_memcpy(result, &mode, 4);
			__builtin_memcpy(result + 8, &size, 8);
			*result_len = 16;
		}
		break;
	}
	case SYS_RESULT_STRING: {
		if (ret <= 0)
			break;
		__u32 n = ret > SYS_RESULT ? SYS_RESULT : (__u32)ret;
		if (!bpf_probe_read_user(result, n & (2 * SYS_RESULT - 1), (void *)ptr))
			*result_len = n;
		break;
	}
	case SYS_RESULT_FDS:
		if (ret == 0 && !bpf_probe_read_user(result, 8, (void *)ptr))
			*result_len = 8;
		break;
	case SYS_RESULT_IOV: {
		__u64 total = 0;
		bool whole = true;
#pragma unroll
		for (int i = 0; i < 16; i++) {
			if (i >= next)
				break;
			__u64 len = 0;
			if (bpf_probe_read_user(&len, 8, (void *)(ptr + 16 * i + 8))) {
				whole = false;
				break;
			}
			total += len;
		}
		if (whole && next <= 16) {
			__builtin_memcpy(result, &total, 8);
			*result_len = 8;
		}
		break;
	}
	case SYS_RESULT_HOW:
		if (!bpf_probe_read_user(result, 16, (void *)ptr))
			*result_len = 16;
		break;
	case SYS_RESULT_CLONE:
		if (!bpf_probe_read_user(result, 8, (void *)ptr))
			*result_len = 8;
		break;
	default:
		break;
	}
}

/* The result the call's table entry asks for, read from its argument. */
static __always_inline void result_of(__u8 *result, __u16 *result_len, struct sys_pending *p, __u32 nr, long ret)
{
	__u8 a = result_arg[nr];
	if (a < 6) {
		__u64 ptr = p->args[a & 7];
		__u64 next = a < 5 ? p->args[(a + 1) & 7] : 0;
		read_result(result, result_len, ret, result_kind[nr], ptr, next);
	}
}

SEC("tp_btf/sys_exit")
int on_sys_exit(__u64 *ctx)
{
	/* (struct pt_regs *regs, long ret) */
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!watched(pid_tgid >> 32))
		return 0;
	__u32 tid = (__u32)pid_tgid;
	struct sys_pending *p = bpf_map_lookup_elem(&pending, &tid);
	if (!p)
		return 0;
	__u32 nr = p->nr & (SYS_NR - 1);
	/* The return time before the data is sent: its copying is not the call's latency. */
	__u64 exit_ns = bpf_ktime_get_ns();
	long ret = (long)ctx[1];
	send_data(p, nr, ret, tid);
	__u8 a0 = path_arg[nr][0], a1 = path_arg[nr][1];
	if (a0 >= 6 && a1 >= 6) {
		struct sys_event_short *e = bpf_ringbuf_reserve(&sys_events, sizeof(*e), 0);
		if (e) {
			fill_head(&e->h, p, pid_tgid);
			e->h.exit_ns = exit_ns;
			e->h.ret = ret;
			result_of(e->result, &e->h.result_len, p, nr, ret);
			bpf_ringbuf_submit(e, wakeup_flags());
		} else {
			count_lost(nr);
		}
	} else {
		struct sys_event *e = bpf_ringbuf_reserve(&sys_events, sizeof(*e), 0);
		if (e) {
			fill_head(&e->h, p, pid_tgid);
			e->h.exit_ns = exit_ns;
			e->h.ret = ret;
			if (nr == NR_EXECVE || nr == NR_EXECVEAT) {
				struct sys_exec_path *x = bpf_map_lookup_elem(&exec_paths, &tid);
				if (x) {
					__u16 n = x->len;
					e->h.path_len[0] = n;
					e->h.cut = x->cut;
					bpf_probe_read_kernel(e->path[0], SYS_PATH, x->path);
				} else {
					e->h.path_len[0] = SYS_UNREADABLE;
				}
			} else {
				if (a0 < 6)
					read_path(e->path[0], &e->h.path_len[0], &e->h.cut, 0, p->args[a0 & 7]);
				if (a1 < 6)
					read_path(e->path[1], &e->h.path_len[1], &e->h.cut, 1, p->args[a1 & 7]);
			}
			result_of(e->result, &e->h.result_len, p, nr, ret);
			bpf_ringbuf_submit(e, wakeup_flags());
		} else {
			count_lost(nr);
		}
	}
	if (nr == NR_EXECVE || nr == NR_EXECVEAT)
		bpf_map_delete_elem(&exec_paths, &tid);
	bpf_map_delete_elem(&pending, &tid);
	return 0;
}

/* A traced process's children are traced (threads share its process id already). */
SEC("tp_btf/sched_process_fork")
int on_fork(__u64 *ctx)
{
	struct task_struct *parent = (struct task_struct *)ctx[0];
	struct task_struct *child = (struct task_struct *)ctx[1];
	__u32 tgid = child->tgid;
	bool ours = children_of && parent->tgid == children_of && tgid != children_of;
	if (!ours && !watched(parent->tgid))
		return 0;
	__u32 word = tgid / 64;
	__u64 *bits = bpf_map_lookup_elem(&tgid_bits, &word);
	if (bits)
		__sync_fetch_and_or(bits, 1ULL << (tgid % 64));
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
