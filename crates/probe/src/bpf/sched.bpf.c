// SPDX-License-Identifier: GPL-2.0
/* The books of a multi-tenant I/O scheduler, fed from the block layer (MittCFQ's successor on a
 * stock kernel): every request of the watched devices entering the scheduler
 * (`block_rq_insert`, in the submitter's context: its thread and I/O priority), leaving it for
 * the driver (`block_rq_issue`), completing (`block_rq_complete`) or absorbed into another
 * (`block_rq_merge`), streamed through a ring buffer in the order they happened. Nothing here
 * changes the system. */
#include "vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "events.h"

/* Set by user space before loading: kernel dev_t of each watched device (0: unused slot). */
const volatile __u32 watched[SCHED_DEVICES] = {};

/* Events the ring buffer had no room for (the books then drift: user space reports it). */
volatile __u64 lost = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} sched_events SEC(".maps");

static __always_inline int device_slot(struct request *rq)
{
	struct gendisk *disk = rq->q->disk;
	if (!disk)
		return -1;
	__u32 dev = ((__u32)disk->major << 20) | (__u32)disk->first_minor;
#pragma unroll
	for (int i = 0; i < SCHED_DEVICES; i++) {
		if (watched[i] && watched[i] == dev)
			return i;
	}
	return -1;
}

/* The request's I/O priority, as the schedulers read it (req_get_ioprio(): its first bio's
 * since 6.10, its own field before). */
static __always_inline __u16 request_ioprio(struct request *rq)
{
	struct request___old *old = (void *)rq;
	if (bpf_core_field_exists(old->ioprio))
		return BPF_CORE_READ(old, ioprio);
	struct bio *bio = rq->bio;
	return bio ? bio->bi_ioprio : 0;
}

static __always_inline void emit(struct request *rq, __u8 kind)
{
	int slot = device_slot(rq);
	if (slot < 0)
		return;
	struct sched_event *e = bpf_ringbuf_reserve(&sched_events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&lost, 1);
		return;
	}
	e->ts_ns = bpf_ktime_get_ns();
	e->rq = (__u64)rq;
	e->sector = rq->__sector;
	e->bytes = rq->__data_len;
	/* The submitter's thread only means something at insert (issue and completion run
	 * wherever the driver does). */
	e->tid = kind == SCHED_INSERT ? (__u32)bpf_get_current_pid_tgid() : 0;
	e->ioprio = request_ioprio(rq);
	e->kind = kind;
	e->device = (__u8)slot;
	e->write = (rq->cmd_flags & 0xff) == 1; /* REQ_OP_WRITE */
	/* No wake-up per event: at tens of thousands of requests a second, a wake-up each cost a
	 * fifth of a loop device's IOPS on a 2-core machine. User space drains every
	 * millisecond; a ring filling up wakes it at once. */
	__u64 pending = bpf_ringbuf_query(&sched_events, BPF_RB_AVAIL_DATA);
	bpf_ringbuf_submit(e, pending > (1 << 20) ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

SEC("tp_btf/block_rq_insert")
int on_sched_insert(__u64 *ctx)
{
	emit((struct request *)ctx[0], SCHED_INSERT);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int on_sched_issue(__u64 *ctx)
{
	emit((struct request *)ctx[0], SCHED_ISSUE);
	return 0;
}

/* A request absorbed into another (it leaves without an issue or a completion). */
SEC("tp_btf/block_rq_merge")
int on_sched_merge(__u64 *ctx)
{
	emit((struct request *)ctx[0], SCHED_MERGED);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int on_sched_complete(__u64 *ctx)
{
	emit((struct request *)ctx[0], SCHED_COMPLETE);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
