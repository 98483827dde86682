/* SPDX-License-Identifier: GPL-2.0 */
/* The record `iolearn trace record` streams for each system call of the traced processes
 * (mirrored by `SyscallEvent::decode` in syscalls.rs: change both together). */
#ifndef IOLEARN_SYSCALLS_H
#define IOLEARN_SYSCALLS_H

#define SYS_NR 512          /* system-call numbers followed (x86-64's are below 512) */
#define SYS_PATH 256        /* bytes of each path argument kept (a longer one is cut, and says so) */
#define SYS_RESULT 64       /* bytes of a result buffer kept */
#define SYS_NO_ARG 0xff     /* "no such argument" in the per-call tables */
#define SYS_UNREADABLE 0xffff /* a path the capture could not read (its page was not in memory) */
#define SYS_DATA_CHUNK 16384  /* bytes of data per data record (a call's data spans as many as it needs) */
#define SYS_DATA_MARK (~0ULL) /* a data record's first word (a call record's is its entry time) */

/* What to read back from user memory at a call's return (`result_kind`). */
enum {
	SYS_RESULT_NONE = 0,
	SYS_RESULT_STAT = 1,     /* struct stat at the argument: st_mode, st_size */
	SYS_RESULT_STATX = 2,    /* struct statx: stx_mode, stx_size */
	SYS_RESULT_STRING = 3,   /* readlink's target: `ret` bytes */
	SYS_RESULT_FDS = 4,      /* pipe's two ints */
	SYS_RESULT_IOV = 5,      /* an iovec array (count in the next argument): the bytes it spans */
	SYS_RESULT_HOW = 6,      /* openat2's struct open_how: flags, mode */
	SYS_RESULT_CLONE = 7,    /* clone3's struct clone_args: flags */
};

/* Every call record's head (96 bytes). */
struct sys_head {
	__u64 enter_ns;
	__u64 exit_ns;      /* 0: the call never returned (exit, exit_group) */
	__u64 args[6];
	__s64 ret;
	__u32 pid;          /* thread group */
	__u32 tid;
	__u32 nr;
	__u16 path_len[2];  /* bytes of each path kept (0: none; SYS_UNREADABLE) */
	__u16 result_len;   /* bytes of `result` filled */
	__u16 cut;          /* bit 0/1: path 0/1 longer than SYS_PATH */
	__u32 pad;
};

/* A call that names paths: head, the two paths, the result (672 bytes). */
struct sys_event {
	struct sys_head h;
	char path[2][SYS_PATH];
	__u8 result[SYS_RESULT];
};

/* A call without paths (most of them: reads, writes, closes): head and result (160 bytes). */
struct sys_event_short {
	struct sys_head h;
	__u8 result[SYS_RESULT];
};

/* Part of a call's data buffer (`--buffers full|hash`), sent before the call's own record
 * from the same thread: `bytes` are the call's data from `offset` on. */
struct sys_data {
	__u64 mark;         /* SYS_DATA_MARK */
	__u64 enter_ns;     /* the call's */
	__u32 tid;
	__u32 len;          /* bytes that follow */
	__u64 offset;
	__u8 bytes[SYS_DATA_CHUNK];
};

/* A call between its entry and its return, by thread. Its paths are read at return (the
 * memory holding them is the caller's until then), except execve's: an exec replaces it. */
struct sys_pending {
	__u64 enter_ns;
	__u64 args[6];
	__u32 nr;
	__u32 pad;
};

/* execve's path, read at entry. */
struct sys_exec_path {
	__u16 len;
	__u16 cut;
	__u32 pad;
	char path[SYS_PATH];
};

#endif
