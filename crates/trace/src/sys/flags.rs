//! Symbolic constants as strace prints them (`O_RDONLY|O_CLOEXEC`, `SEEK_SET`, `0644`), back to
//! the numbers the kernel took. Values come from `libc` (this target's headers), so they are
//! the kernel ABI's, not copies. Names are unique across families, so one table serves every
//! argument.

use std::collections::HashMap;
use std::sync::OnceLock;

macro_rules! table {
    ($($name:ident),* $(,)?) => {
        &[$((stringify!($name), libc::$name as i64 as u64)),*]
    };
}

/// Every name strace may print for a flag, mode, command or advice of a call in the table.
fn names() -> &'static HashMap<&'static str, u64> {
    static NAMES: OnceLock<HashMap<&'static str, u64>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let libc_names: &[(&str, u64)] = table![
            O_RDONLY,
            O_WRONLY,
            O_RDWR,
            O_CREAT,
            O_EXCL,
            O_NOCTTY,
            O_TRUNC,
            O_APPEND,
            O_NONBLOCK,
            O_NDELAY,
            O_DSYNC,
            O_ASYNC,
            O_DIRECT,
            O_LARGEFILE,
            O_DIRECTORY,
            O_NOFOLLOW,
            O_NOATIME,
            O_CLOEXEC,
            O_SYNC,
            O_RSYNC,
            O_PATH,
            O_TMPFILE,
            AT_SYMLINK_NOFOLLOW,
            AT_REMOVEDIR,
            AT_SYMLINK_FOLLOW,
            AT_NO_AUTOMOUNT,
            AT_EMPTY_PATH,
            AT_EACCESS,
            AT_STATX_SYNC_AS_STAT,
            AT_STATX_FORCE_SYNC,
            AT_STATX_DONT_SYNC,
            AT_RECURSIVE,
            RENAME_NOREPLACE,
            RENAME_EXCHANGE,
            RENAME_WHITEOUT,
            F_OK,
            R_OK,
            W_OK,
            X_OK,
            SEEK_SET,
            SEEK_CUR,
            SEEK_END,
            SEEK_DATA,
            SEEK_HOLE,
            PROT_NONE,
            PROT_READ,
            PROT_WRITE,
            PROT_EXEC,
            PROT_GROWSDOWN,
            PROT_GROWSUP,
            MAP_SHARED,
            MAP_PRIVATE,
            MAP_SHARED_VALIDATE,
            MAP_FIXED,
            MAP_ANONYMOUS,
            MAP_ANON,
            MAP_DENYWRITE,
            MAP_EXECUTABLE,
            MAP_NORESERVE,
            MAP_POPULATE,
            MAP_NONBLOCK,
            MAP_STACK,
            MAP_HUGETLB,
            MAP_FIXED_NOREPLACE,
            MAP_GROWSDOWN,
            MAP_LOCKED,
            MAP_32BIT,
            MAP_SYNC,
            MS_ASYNC,
            MS_INVALIDATE,
            MS_SYNC,
            MADV_NORMAL,
            MADV_RANDOM,
            MADV_SEQUENTIAL,
            MADV_WILLNEED,
            MADV_DONTNEED,
            MADV_FREE,
            MADV_REMOVE,
            MADV_DONTFORK,
            MADV_DOFORK,
            MADV_MERGEABLE,
            MADV_UNMERGEABLE,
            MADV_HUGEPAGE,
            MADV_NOHUGEPAGE,
            MADV_DONTDUMP,
            MADV_DODUMP,
            MADV_WIPEONFORK,
            MADV_KEEPONFORK,
            MADV_COLD,
            MADV_PAGEOUT,
            MADV_HWPOISON,
            MADV_POPULATE_READ,
            MADV_POPULATE_WRITE,
            POSIX_FADV_NORMAL,
            POSIX_FADV_RANDOM,
            POSIX_FADV_SEQUENTIAL,
            POSIX_FADV_WILLNEED,
            POSIX_FADV_DONTNEED,
            POSIX_FADV_NOREUSE,
            F_DUPFD,
            F_GETFD,
            F_SETFD,
            F_GETFL,
            F_SETFL,
            F_GETLK,
            F_SETLK,
            F_SETLKW,
            F_SETOWN,
            F_GETOWN,
            F_DUPFD_CLOEXEC,
            F_SETPIPE_SZ,
            F_GETPIPE_SZ,
            F_ADD_SEALS,
            F_GET_SEALS,
            F_OFD_GETLK,
            F_OFD_SETLK,
            F_OFD_SETLKW,
            F_SETLEASE,
            F_GETLEASE,
            F_NOTIFY,
            FD_CLOEXEC,
            LOCK_SH,
            LOCK_EX,
            LOCK_NB,
            LOCK_UN,
            FALLOC_FL_KEEP_SIZE,
            FALLOC_FL_PUNCH_HOLE,
            FALLOC_FL_COLLAPSE_RANGE,
            FALLOC_FL_ZERO_RANGE,
            FALLOC_FL_INSERT_RANGE,
            FALLOC_FL_UNSHARE_RANGE,
            SYNC_FILE_RANGE_WAIT_BEFORE,
            SYNC_FILE_RANGE_WRITE,
            SYNC_FILE_RANGE_WAIT_AFTER,
            XATTR_CREATE,
            XATTR_REPLACE,
            CLONE_VM,
            CLONE_FS,
            CLONE_FILES,
            CLONE_SIGHAND,
            CLONE_PIDFD,
            CLONE_PTRACE,
            CLONE_VFORK,
            CLONE_PARENT,
            CLONE_THREAD,
            CLONE_NEWNS,
            CLONE_SYSVSEM,
            CLONE_SETTLS,
            CLONE_PARENT_SETTID,
            CLONE_CHILD_CLEARTID,
            CLONE_DETACHED,
            CLONE_UNTRACED,
            CLONE_CHILD_SETTID,
            CLONE_NEWCGROUP,
            CLONE_NEWUTS,
            CLONE_NEWIPC,
            CLONE_NEWUSER,
            CLONE_NEWPID,
            CLONE_NEWNET,
            CLONE_IO,
            SIGCHLD,
            STATX_TYPE,
            STATX_MODE,
            STATX_NLINK,
            STATX_UID,
            STATX_GID,
            STATX_ATIME,
            STATX_MTIME,
            STATX_CTIME,
            STATX_INO,
            STATX_SIZE,
            STATX_BLOCKS,
            STATX_BASIC_STATS,
            STATX_BTIME,
            STATX_ALL,
            STATX_MNT_ID,
            STATX_DIOALIGN,
            RWF_HIPRI,
            RWF_DSYNC,
            RWF_SYNC,
            RWF_NOWAIT,
            RWF_APPEND,
            SPLICE_F_MOVE,
            SPLICE_F_NONBLOCK,
            SPLICE_F_MORE,
            SPLICE_F_GIFT,
            S_IFREG,
            S_IFDIR,
            S_IFLNK,
            S_IFCHR,
            S_IFBLK,
            S_IFIFO,
            S_IFSOCK,
            S_ISUID,
            S_ISGID,
            S_ISVTX,
            S_IRWXU,
            S_IRUSR,
            S_IWUSR,
            S_IXUSR,
            S_IRWXG,
            S_IRGRP,
            S_IWGRP,
            S_IXGRP,
            S_IRWXO,
            S_IROTH,
            S_IWOTH,
            S_IXOTH,
        ];
        let mut m: HashMap<&'static str, u64> = libc_names.iter().copied().collect();
        // Names strace prints that libc does not define (values from the kernel's
        // include/uapi/asm-generic/fcntl.h).
        m.insert("NULL", 0);
        m.insert("FASYNC", libc::O_ASYNC as u64);
        m.insert("F_SETSIG", 10);
        m.insert("F_GETSIG", 11);
        m
    })
}

/// The value of one constant's name, if strace may print it.
pub fn named(name: &str) -> Option<u64> {
    names().get(name).copied()
}

/// A number as strace prints one: decimal, `0x` hex, or octal with a leading `0`; negative
/// numbers as their two's complement.
pub fn number(text: &str) -> Option<u64> {
    let t = text.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    let v = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()?
    } else if t.len() > 1 && t.starts_with('0') {
        u64::from_str_radix(&t[1..], 8).ok()?
    } else {
        t.parse::<u64>().ok()?
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

/// `A|B|0x40` -> the bits ORed; an unknown name is an error naming it. A trailing comment
/// (`0x1000 /* O_??? */`) is ignored.
pub fn parse(text: &str) -> Result<u64, String> {
    let t = match text.find("/*") {
        Some(i) => &text[..i],
        None => text,
    };
    let t = t.trim();
    if t.is_empty() {
        return Err("empty".into());
    }
    let mut v = 0u64;
    for part in t.split('|') {
        let part = part.trim();
        v |= match number(part).or_else(|| named(part)) {
            Some(x) => x,
            None => return Err(format!("unknown constant {part:?}")),
        };
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_numbers_parse_as_the_kernel_took_them() {
        assert_eq!(parse("O_RDONLY|O_CLOEXEC"), Ok(libc::O_CLOEXEC as u64));
        assert_eq!(
            parse("O_WRONLY|O_CREAT|O_TRUNC"),
            Ok((libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC) as u64)
        );
        assert_eq!(parse("0644"), Ok(0o644));
        assert_eq!(parse("S_IFREG|0600"), Ok(libc::S_IFREG as u64 | 0o600));
        assert_eq!(parse("0x40|O_RDWR"), Ok(0x40 | 2));
        assert_eq!(parse("SEEK_END"), Ok(2));
        assert_eq!(parse("0x80000 /* O_??? */"), Ok(0x80000));
        assert_eq!(number("-1"), Some(u64::MAX));
        assert_eq!(number("0"), Some(0));
        assert!(parse("O_BOGUS").unwrap_err().contains("O_BOGUS"));
        assert!(parse("").is_err());
        assert!(parse("O_RDONLY|").is_err());
    }
}
