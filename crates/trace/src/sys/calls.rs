//! The system calls a trace records, and what each argument means.
//!
//! One table drives every source and every consumer: the strace reader decodes argument `i`
//! by `roles()[i]`, the eBPF capture reads register `i` the same way, and the replayer finds
//! a call's file descriptor, path or offset in the record's fields those roles fill. Numbers
//! are x86-64's (the only ABI this machine's capture reads; an ia32 task is flagged, not
//! decoded). A table instead of hand-written per-call code: adding a call is one line.

/// What a system-call argument is, and which [`super::SysRecord`] field keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The file descriptor acted on (`fd`).
    Fd,
    /// The directory a relative `path` starts from (`dirfd`; `AT_FDCWD` is -100).
    DirFd,
    /// The name acted on or created (`path`).
    Path,
    /// The second directory (`dirfd2`: renameat's and linkat's new side).
    DirFd2,
    /// The second name (`path2`): a rename's or link's new name, a symlink's target text.
    Path2,
    /// A second descriptor (`fd2`): dup2's new fd, sendfile's or splice's destination.
    Fd2,
    /// Data read or written (its hash or bytes go to the data side; its length is `count`).
    Buf,
    /// An iovec array: the bytes it spans go to `count`.
    Iov,
    /// Bytes or a length (`count`).
    Count,
    /// A file offset or length (`offset`).
    Offset,
    /// Flags (`flags`): open's, the `*at` calls', rename's, mmap's, fallocate's mode...
    Flags,
    /// Permission bits, an access mode, or mmap's protection (`mode`).
    Mode,
    /// A command or advice (`cmd`): fcntl's and ioctl's request, lseek's whence, fadvise's advice.
    Cmd,
    /// A memory address (`addr`): the mmap family.
    Addr,
    /// An owner (`uid`).
    Uid,
    /// A group (`gid`).
    Gid,
    /// An extended attribute's name (`name`).
    Name,
    /// A buffer the kernel fills with a result (stat, getdents, readlink): `result`.
    Out,
    /// pipe's two new descriptors (`fd`, `fd2`).
    OutFds,
    /// Not kept (a pointer, a count of vectors, an environment).
    Skip,
}

macro_rules! calls {
    ($($variant:ident $name:literal $nr:literal [$($role:ident)*];)*) => {
        /// A system call a trace records (a few pseudo-calls have no number).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[allow(missing_docs)]
        pub enum Call { $($variant,)* }

        impl Call {
            /// Every call, in table order.
            pub const ALL: &'static [Call] = &[$(Call::$variant,)*];

            /// Its name as strace prints it.
            pub fn name(self) -> &'static str {
                match self { $(Call::$variant => $name,)* }
            }

            /// Its x86-64 number; `None` for a pseudo-call.
            pub fn x86_64_nr(self) -> Option<u32> {
                let nr: i32 = match self { $(Call::$variant => $nr,)* };
                u32::try_from(nr).ok()
            }

            /// What each argument is, in order.
            pub fn roles(self) -> &'static [Role] {
                match self { $(Call::$variant => &[$(Role::$role),*],)* }
            }
        }
    };
}

calls! {
    Read "read" 0 [Fd Buf Count];
    Write "write" 1 [Fd Buf Count];
    Open "open" 2 [Path Flags Mode];
    Close "close" 3 [Fd];
    Stat "stat" 4 [Path Out];
    Fstat "fstat" 5 [Fd Out];
    Lstat "lstat" 6 [Path Out];
    Lseek "lseek" 8 [Fd Offset Cmd];
    Mmap "mmap" 9 [Addr Count Mode Flags Fd Offset];
    Mprotect "mprotect" 10 [Addr Count Mode];
    Munmap "munmap" 11 [Addr Count];
    Ioctl "ioctl" 16 [Fd Cmd Skip];
    Pread64 "pread64" 17 [Fd Buf Count Offset];
    Pwrite64 "pwrite64" 18 [Fd Buf Count Offset];
    Readv "readv" 19 [Fd Iov Skip];
    Writev "writev" 20 [Fd Iov Skip];
    Access "access" 21 [Path Mode];
    Pipe "pipe" 22 [OutFds];
    Msync "msync" 26 [Addr Count Flags];
    Madvise "madvise" 28 [Addr Count Cmd];
    Dup "dup" 32 [Fd];
    Dup2 "dup2" 33 [Fd Fd2];
    Sendfile "sendfile" 40 [Fd2 Fd Skip Count];
    Clone "clone" 56 [Flags Skip Skip Skip Skip];
    Fork "fork" 57 [];
    Vfork "vfork" 58 [];
    Execve "execve" 59 [Path Skip Skip];
    Exit "exit" 60 [Cmd];
    Fcntl "fcntl" 72 [Fd Cmd Flags];
    Flock "flock" 73 [Fd Cmd];
    Fsync "fsync" 74 [Fd];
    Fdatasync "fdatasync" 75 [Fd];
    Truncate "truncate" 76 [Path Offset];
    Ftruncate "ftruncate" 77 [Fd Offset];
    Getdents "getdents" 78 [Fd Out Count];
    Chdir "chdir" 80 [Path];
    Fchdir "fchdir" 81 [Fd];
    Rename "rename" 82 [Path Path2];
    Mkdir "mkdir" 83 [Path Mode];
    Rmdir "rmdir" 84 [Path];
    Creat "creat" 85 [Path Mode];
    Link "link" 86 [Path Path2];
    Unlink "unlink" 87 [Path];
    Symlink "symlink" 88 [Path2 Path];
    Readlink "readlink" 89 [Path Out Count];
    Chmod "chmod" 90 [Path Mode];
    Fchmod "fchmod" 91 [Fd Mode];
    Chown "chown" 92 [Path Uid Gid];
    Fchown "fchown" 93 [Fd Uid Gid];
    Lchown "lchown" 94 [Path Uid Gid];
    Sync "sync" 162 [];
    Readahead "readahead" 187 [Fd Offset Count];
    Setxattr "setxattr" 188 [Path Name Buf Count Flags];
    Lsetxattr "lsetxattr" 189 [Path Name Buf Count Flags];
    Fsetxattr "fsetxattr" 190 [Fd Name Buf Count Flags];
    Getxattr "getxattr" 191 [Path Name Out Count];
    Lgetxattr "lgetxattr" 192 [Path Name Out Count];
    Fgetxattr "fgetxattr" 193 [Fd Name Out Count];
    Listxattr "listxattr" 194 [Path Out Count];
    Llistxattr "llistxattr" 195 [Path Out Count];
    Flistxattr "flistxattr" 196 [Fd Out Count];
    Removexattr "removexattr" 197 [Path Name];
    Lremovexattr "lremovexattr" 198 [Path Name];
    Fremovexattr "fremovexattr" 199 [Fd Name];
    IoSetup "io_setup" 206 [Count Skip];
    IoDestroy "io_destroy" 207 [Addr];
    IoGetevents "io_getevents" 208 [Addr Skip Count Skip Skip];
    IoSubmit "io_submit" 209 [Addr Count Skip];
    Getdents64 "getdents64" 217 [Fd Out Count];
    Fadvise64 "fadvise64" 221 [Fd Offset Count Cmd];
    ExitGroup "exit_group" 231 [Cmd];
    Openat "openat" 257 [DirFd Path Flags Mode];
    Mkdirat "mkdirat" 258 [DirFd Path Mode];
    Fchownat "fchownat" 260 [DirFd Path Uid Gid Flags];
    Newfstatat "newfstatat" 262 [DirFd Path Out Flags];
    Unlinkat "unlinkat" 263 [DirFd Path Flags];
    Renameat "renameat" 264 [DirFd Path DirFd2 Path2];
    Linkat "linkat" 265 [DirFd Path DirFd2 Path2 Flags];
    Symlinkat "symlinkat" 266 [Path2 DirFd Path];
    Readlinkat "readlinkat" 267 [DirFd Path Out Count];
    Fchmodat "fchmodat" 268 [DirFd Path Mode];
    Faccessat "faccessat" 269 [DirFd Path Mode];
    Splice "splice" 275 [Fd Skip Fd2 Skip Count Flags];
    SyncFileRange "sync_file_range" 277 [Fd Offset Count Flags];
    Utimensat "utimensat" 280 [DirFd Path Skip Flags];
    Fallocate "fallocate" 285 [Fd Flags Offset Count];
    Dup3 "dup3" 292 [Fd Fd2 Flags];
    Pipe2 "pipe2" 293 [OutFds Flags];
    Preadv "preadv" 295 [Fd Iov Skip Offset];
    Pwritev "pwritev" 296 [Fd Iov Skip Offset];
    Syncfs "syncfs" 306 [Fd];
    Renameat2 "renameat2" 316 [DirFd Path DirFd2 Path2 Flags];
    CopyFileRange "copy_file_range" 326 [Fd Skip Fd2 Skip Count Flags];
    Preadv2 "preadv2" 327 [Fd Iov Skip Offset Flags];
    Pwritev2 "pwritev2" 328 [Fd Iov Skip Offset Flags];
    Statx "statx" 332 [DirFd Path Flags Mode Out];
    Clone3 "clone3" 435 [Flags Skip];
    Openat2 "openat2" 437 [DirFd Path Flags Skip];
    Faccessat2 "faccessat2" 439 [DirFd Path Mode Flags];
    MmapPread "mmap_pread" -1 [Fd Offset Count];
    MmapPwrite "mmap_pwrite" -1 [Fd Offset Count];
}

impl Call {
    /// By the name strace prints (`pread64`, `newfstatat`...), or a pseudo-call's name.
    pub fn by_name(name: &str) -> Option<Call> {
        Call::ALL.iter().copied().find(|c| c.name() == name)
    }

    /// By x86-64 number.
    pub fn by_x86_64_nr(nr: u32) -> Option<Call> {
        Call::ALL.iter().copied().find(|c| c.x86_64_nr() == Some(nr))
    }

    /// Calls that return a new file descriptor when they succeed (fcntl only for
    /// `F_DUPFD` and `F_DUPFD_CLOEXEC`: see [`super::SysRecord::new_fd`]).
    pub fn returns_fd(self) -> bool {
        matches!(
            self,
            Call::Open | Call::Openat | Call::Openat2 | Call::Creat | Call::Dup | Call::Dup2 | Call::Dup3
        )
    }

    /// Reads or writes data: the calls whose buffers a full capture keeps.
    pub fn carries_data(self) -> bool {
        self.roles().iter().any(|r| matches!(r, Role::Buf | Role::Iov))
    }

    /// Moves file data and returns how many bytes it moved (the read and write families; an
    /// xattr's value is not file data): the calls whose bytes `--buffers` keeps.
    pub fn moves_data(self) -> bool {
        self.carries_data() && !self.roles().contains(&Role::Name)
    }

    /// Writes data (the buffer goes in, not out).
    pub fn writes(self) -> bool {
        matches!(
            self,
            Call::Write | Call::Pwrite64 | Call::Writev | Call::Pwritev | Call::Pwritev2 | Call::MmapPwrite
        ) || matches!(self, Call::Setxattr | Call::Lsetxattr | Call::Fsetxattr)
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_are_unique_and_found_back() {
        for (i, a) in Call::ALL.iter().enumerate() {
            assert_eq!(Call::by_name(a.name()), Some(*a));
            if let Some(nr) = a.x86_64_nr() {
                assert_eq!(Call::by_x86_64_nr(nr), Some(*a), "{}", a.name());
            }
            for b in &Call::ALL[i + 1..] {
                assert_ne!(a.name(), b.name());
            }
        }
        // A few numbers checked against <asm/unistd_64.h>, which libc mirrors.
        for (call, nr) in [
            (Call::Read, libc::SYS_read),
            (Call::Openat, libc::SYS_openat),
            (Call::Renameat2, libc::SYS_renameat2),
            (Call::Statx, libc::SYS_statx),
            (Call::CopyFileRange, libc::SYS_copy_file_range),
            (Call::Openat2, libc::SYS_openat2),
            (Call::Faccessat2, libc::SYS_faccessat2),
            (Call::Getdents64, libc::SYS_getdents64),
            (Call::Fadvise64, libc::SYS_fadvise64),
            (Call::SyncFileRange, libc::SYS_sync_file_range),
            (Call::Readahead, libc::SYS_readahead),
            (Call::ExitGroup, libc::SYS_exit_group),
        ] {
            assert_eq!(call.x86_64_nr(), Some(nr as u32), "{}", call.name());
        }
    }

    #[test]
    fn every_numbered_call_agrees_with_libc() {
        // libc's SYS_* constants for this target, by name.
        let known: &[(&str, libc::c_long)] = &[
            ("write", libc::SYS_write),
            ("open", libc::SYS_open),
            ("close", libc::SYS_close),
            ("lseek", libc::SYS_lseek),
            ("mmap", libc::SYS_mmap),
            ("pread64", libc::SYS_pread64),
            ("pwrite64", libc::SYS_pwrite64),
            ("dup3", libc::SYS_dup3),
            ("pipe2", libc::SYS_pipe2),
            ("preadv2", libc::SYS_preadv2),
            ("pwritev2", libc::SYS_pwritev2),
            ("clone3", libc::SYS_clone3),
            ("fallocate", libc::SYS_fallocate),
            ("utimensat", libc::SYS_utimensat),
            ("splice", libc::SYS_splice),
            ("newfstatat", libc::SYS_newfstatat),
            ("unlinkat", libc::SYS_unlinkat),
            ("symlinkat", libc::SYS_symlinkat),
            ("io_submit", libc::SYS_io_submit),
            ("fremovexattr", libc::SYS_fremovexattr),
            ("syncfs", libc::SYS_syncfs),
            ("sendfile", libc::SYS_sendfile),
            ("vfork", libc::SYS_vfork),
            ("fchownat", libc::SYS_fchownat),
        ];
        for (name, nr) in known {
            assert_eq!(
                Call::by_name(name).and_then(Call::x86_64_nr),
                Some(*nr as u32),
                "{name}"
            );
        }
    }
}
